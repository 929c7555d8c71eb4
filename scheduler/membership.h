// Who is in the job and how nodes get in: every REGISTER. Before the job runs, the rendezvous
// (Rendezvous) holds them until the whole job has registered, then ranks them (each worker at
// the rank it asked for, if it did; NodeTable) and answers each with the address book. Once it
// runs, a worker joins (JoinCoordinator: the next rank, whatever it asks) and a server takes a
// lost server's rank (ServerReplacement); each gets the book and where the barriers stand
// (register_replies.h).
#ifndef R2SP_SCHEDULER_MEMBERSHIP_H_
#define R2SP_SCHEDULER_MEMBERSHIP_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/handler.h"
#include "scheduler/barrier_book.h"
#include "scheduler/join_coordinator.h"
#include "scheduler/node_table.h"
#include "scheduler/rendezvous.h"
#include "scheduler/server_replacement.h"
#include "scheduler/slot_coordinator.h"

namespace r2sp {

struct MembershipOptions {
  int num_servers = 1;  // REQUIRES: >= 1
  int num_workers = 1;  // REQUIRES: >= 1
  proto::SyncMode sync = proto::ASP;
  absl::Duration heartbeat_timeout = absl::Seconds(3);
  absl::Duration server_replace_timeout = absl::ZeroDuration();  // see ServerReplacement
  // The job-wide fields of every address book (server_replace_ms is filled in here).
  proto::AddressBook book_settings;
};

// Not thread-safe: SchedulerCore calls it under its lock.
class Membership {
 public:
  // Borrowed, and outliving this: `nodes` gets the nodes, `slots` the workers that train,
  // `barriers` tells joiners where the barriers stand, `requester` is told the servers' role.
  Membership(const MembershipOptions& options, NodeTable* nodes, SlotCoordinator* slots,
             const BarrierBook* barriers, Requester* requester);

  // A REGISTER; `ending`: the job is ending; `failure`: why it failed, or empty. OK: answered,
  // or held until the rendezvous, a join or a lost server. An error: `responder` has not been
  // answered (PERMISSION_DENIED: a peer that is not who it claims; INVALID_ARGUMENT: a
  // malformed request, a server asking for a rank; Rendezvous::Register's).
  absl::Status Register(const proto::Header& header, Responder& responder, absl::Time now,
                        bool ending, const std::string& failure);
  bool rendezvous_done() const { return rendezvous_done_; }
  // Not every node registered in time: the held registrations are told `why`.
  void FailRendezvous(const std::string& why);
  // A server's answer to the MEMBERSHIP of worker `rank`'s join.
  void ServerAnswered(int rank, const absl::StatusOr<Message>& reply, absl::Time now);
  // Lets waiting joiners and replacement servers in (once a periodic tick).
  void AdmitWaiting(absl::Time now, bool ending, const std::string& failure);

  JoinCoordinator& joins() { return joins_; }
  ServerReplacement& replacement() { return replacement_; }
  const ServerReplacement& replacement() const { return replacement_; }

 private:
  absl::Status RegisterWithRunningJob(const proto::RegisterRequest& reg, Responder& responder,
                                      absl::Time now, bool ending, const std::string& failure);
  void CompleteRendezvous(absl::Time now);
  // ServerReplacement::Replace, and the replaced server's reply.
  absl::Status ReplaceServer(const proto::RegisterRequest& reg, Responder& responder,
                             absl::Time now, const std::string& failure, bool waited);
  // Answers the joins every server answered.
  void FinishJoins(absl::Time now);
  proto::AddressBook Book(bool for_servers) const;

  const int num_workers_;
  const absl::Duration heartbeat_timeout_;  // nodes whose heartbeat cannot meet it are refused
  proto::AddressBook book_settings_;
  NodeTable* const nodes_;
  SlotCoordinator* const slots_;
  const BarrierBook* const barriers_;
  Requester* const requester_;
  Rendezvous rendezvous_;
  bool rendezvous_done_ = false;
  JoinCoordinator joins_;
  ServerReplacement replacement_;
};

}  // namespace r2sp

#endif  // R2SP_SCHEDULER_MEMBERSHIP_H_
