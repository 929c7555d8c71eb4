// Workers that join a running job, in every mode. A joiner that wants a data shard waits for a
// dead worker's (at most once per epoch: it never trains a live one's), then gets the next rank
// (whatever rank it asked for: a replacement never takes a dead worker's rank) once every live
// server knows it. asp and r2sp joiners take part at once: one MEMBERSHIP per
// server. bsp and ssp joiners join at a clock boundary, one join at a time, in two steps (proto
// Membership): `prepare` to every live server (a bsp server then holds its clocks) answered with
// the first clock a joiner may take part from there; the largest answer is the join clock,
// which the MEMBERSHIP that adds the worker carries to every server and the REGISTER reply to
// the joiner. A server that cannot prepare cancels the join (the hold is released, the joiner
// is told to try again). It also keeps the data shards of dead workers (orphaned shards) that
// joiners may take.
#ifndef R2SP_SCHEDULER_JOIN_COORDINATOR_H_
#define R2SP_SCHEDULER_JOIN_COORDINATOR_H_

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/handler.h"
#include "scheduler/node_table.h"
#include "scheduler/waiting_registers.h"

namespace r2sp {

struct JoinCoordinatorOptions {
  proto::SyncMode sync = proto::ASP;  // bsp and ssp join at a clock
  int num_workers = 1;                // at most this many joiners wait at once
  // A joiner waits for a free data shard three of these at most.
  absl::Duration heartbeat_timeout = absl::Seconds(3);
};

// A MEMBERSHIP request to send to a server for the join of worker `rank`.
struct MembershipNote {
  int rank;
  std::string endpoint;
  proto::Membership membership;
};

// A join every server answered: the joiner is to get its REGISTER reply.
struct CompletedJoin {
  int rank;
  int64_t join_clock;  // bsp and ssp; 0 otherwise
  Responder responder;
};

// Not thread-safe: SchedulerCore calls it under its lock. What it has for the servers and the
// joiners it queues (TakeMemberships, TakeCompleted); the caller sends and answers them.
class JoinCoordinator {
 public:
  // `nodes` (borrowed; outlives this) gets the joiners.
  JoinCoordinator(const JoinCoordinatorOptions& options, NodeTable* nodes);

  bool JoinsAtAClock() const;
  // A worker's REGISTER with the running job (model checked by the caller); `waited`: it
  // already waited for a free data shard. OK: it joins or waits. An error, and `responder` has
  // not been answered: ALREADY_EXISTS (the instance is registered), FAILED_PRECONDITION (too
  // many wait), PERMISSION_DENIED (a repeat over another connection).
  absl::Status Join(const proto::RegisterRequest& reg, Responder& responder, absl::Time now,
                    bool waited = false);
  // A server's answer to the MEMBERSHIP of the join of `rank`.
  void ServerAnswered(int rank, const absl::StatusOr<Message>& reply);
  // Lets waiting joins in (a shard is free, or they waited long enough; bsp and ssp: once the
  // join before them is done); `ending`: they are told the job is ending.
  void AdmitWaiting(absl::Time now, bool ending);

  // Whether worker `rank` is joining (not a member until its REGISTER reply).
  bool IsJoining(int rank) const { return pending_.contains(rank); }
  // A dead worker's data shard, free for a joiner.
  void ShardOrphaned(int shard) { orphan_shards_.push_back(shard); }
  // An epoch plan dealt every orphaned shard out: none is free until the next dies.
  void ShardsDealtOut() { orphan_shards_.clear(); }
  const std::deque<int>& orphan_shards() const { return orphan_shards_; }

  std::vector<MembershipNote> TakeMemberships();
  std::vector<CompletedJoin> TakeCompleted();

 private:
  struct PendingJoin {
    Responder responder;
    int acks_outstanding;
    // bsp and ssp: the servers' answers to the prepare are awaited; the largest so far (the
    // clock the worker joins at, once all came); whether a server could not prepare.
    bool preparing = false;
    int64_t join_clock = 0;
    bool refused = false;
  };

  // Queues `membership` to every live server for the join of `rank`; how many.
  int TellServers(int rank, const proto::Membership& membership);
  // Every server answered the join's prepare (then commit it, or cancel it) or its MEMBERSHIP
  // (then the joiner gets its reply).
  void ServersAnswered(int rank);
  void CancelJoin(int rank);
  void Complete(int rank);

  const JoinCoordinatorOptions options_;
  NodeTable* const nodes_;
  absl::flat_hash_map<int, PendingJoin> pending_;  // by new rank
  // Joining workers that want a data shard while none is free: a replacement started as soon as
  // its predecessor died registers before the death is detected. They join once a shard frees
  // up, or without one after three heartbeat timeouts.
  WaitingRegisters waiting_;
  // Data shards of dead workers, for the workers that join (oldest first).
  std::deque<int> orphan_shards_;
  std::vector<MembershipNote> memberships_;
  std::vector<CompletedJoin> completed_;
};

}  // namespace r2sp

#endif  // R2SP_SCHEDULER_JOIN_COORDINATOR_H_
