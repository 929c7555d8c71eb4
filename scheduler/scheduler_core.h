// The scheduler's protocol logic: registration and rank assignment, the address book,
// heartbeats with failure detection, barriers, and the orderly end of the job (every worker
// finished or dead -> SHUTDOWN to every live server). SchedulerCore dispatches; each part has
// its own file: scheduler_core.cc (dispatch, failure detection, the end of the job),
// scheduler_membership.cc (registration, the address book, joining workers),
// scheduler_barriers.cc (barriers), slot_coordinator.h (r2sp slots and the batch tuner, a
// class of its own) and scheduler_report.cc (the stats JSON, ReportJson).
#ifndef R2SP_SCHEDULER_SCHEDULER_CORE_H_
#define R2SP_SCHEDULER_SCHEDULER_CORE_H_

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/handler.h"
#include "common/log_limiter.h"
#include "scheduler/batch_tuner.h"
#include "scheduler/epoch_plans.h"
#include "scheduler/scheduler_options.h"
#include "scheduler/slot_coordinator.h"
#include "scheduler/slot_planner.h"

namespace r2sp {

// Thread-safety: the RequestHandler methods run on the I/O thread; done(), failed() and
// ReportJson() may be called from any thread.
class SchedulerCore : public RequestHandler {
 public:
  using Clock = std::function<absl::Time()>;
  // `requester` (borrowed; outlives this) sends SHUTDOWN to the servers. `clock` tells the
  // time (tests pass a fake one).
  SchedulerCore(const SchedulerOptions& options, Requester* requester,
                Clock clock = &absl::Now);

  void HandleRequest(Message request, Responder responder) override;
  void OnTick(absl::Time now) override;
  absl::Time NextWakeup() override;

  // Notified when the job is over (normally or not).
  absl::Notification& done() { return done_; }
  // Why the job failed, or empty.
  std::string failure() const;
  // Every node's role, rank, endpoint, state and counters, as JSON.
  std::string ReportJson() const;

 private:
  enum class NodeState { kAlive, kFinished, kDead };
  struct Node {
    proto::Role role;
    int rank;
    std::string endpoint;
    std::string instance_id;
    std::string routing_id;  // the connection it registered over; its requests must use it
    absl::Time last_seen;
    NodeState state = NodeState::kAlive;
    proto::NodeCounters counters;
    int data_shard = -1;       // workers: the data shard they train on (proto RegisterReply)
    int64_t progress = -1;     // workers: the count their latest heartbeat carried
    absl::Time last_progress;  // when that count last changed
    // Servers: which replacement this is (proto NodeInfo.incarnation), and, lost, until when a
    // replacement is awaited (InfinitePast: none is).
    int incarnation = 0;
    absl::Time replace_by = absl::InfinitePast();
  };
  struct PendingRegister {
    proto::RegisterRequest request;
    Responder responder;
  };
  struct BarrierState {
    uint64_t id = 0;
    std::vector<Node*> arrived;
    std::vector<Responder> waiting;
  };

  // "server", "worker" or "node", for logs and errors.
  static const char* RoleName(proto::Role role);

  void HandleRegister(const Message& request, Responder& responder, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Everything but REGISTER: the sender must be a registered, live node.
  void HandleFromNode(const Message& request, Responder& responder, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CompleteRendezvous(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The address book; `for_servers` adds the workers' routing ids (servers take PUSH and PULL
  // only from those connections).
  proto::AddressBook Book(bool for_servers) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers `responder` with PERMISSION_DENIED and counts it.
  void Deny(Responder& responder, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Workers joining a running job (scheduler_joins.cc). A worker registering with a running
  // job gets the next rank once every live server knows it (bsp and ssp: once they agreed on
  // the clock it joins at). `waited`: it already waited for a free data shard (WaitingJoin).
  void JoinWorker(const proto::RegisterRequest& reg, Responder& responder, absl::Time now,
                  bool waited = false) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // bsp and ssp: joiners take part from a clock the servers agree on.
  bool JoinsAtAClock() const;
  // The MEMBERSHIP naming every worker there is.
  proto::Membership Grown() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues `membership` to every live server for the join of `rank`; how many.
  int TellServers(int rank, const proto::Membership& membership)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ServerKnowsJoin(int rank, absl::StatusOr<Message> reply) ABSL_LOCKS_EXCLUDED(mu_);
  // Every server answered the join's prepare (then commit it, or cancel it) or its MEMBERSHIP
  // (then the joiner gets its reply).
  void ServersAnswered(int rank) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CancelJoin(int rank) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  struct WaitingJoin;
  // Parks a REGISTER in `waiting` until what it waits `for_what` comes (a repeat of it over
  // the same connection replaces the responder; over another, it is denied).
  void Park(std::vector<WaitingJoin>& waiting, const proto::RegisterRequest& reg,
            Responder& responder, absl::Time now, const char* for_what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Lets waiting joins in (a shard is free, or they waited long enough; bsp and ssp: once the
  // join before them is done).
  void AdmitWaitingJoins(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishJoin(int rank) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The REGISTER reply of a node that joins the running job (a worker, or a server replacing a
  // lost one): its rank, the address book, and where the groups' barriers stand.
  Message JoinedReply(const Node& node) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The registered node the header names (dead or not), if the request came over that node's
  // connection (and, with authentication, from a peer of its role); else an error.
  absl::StatusOr<Node*> Sender(const proto::Header& header, const Responder& responder)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleHeartbeat(const Message& request, Node& node, Responder& responder, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Declares nodes dead: silent past heartbeat_timeout, or workers stalled past
  // progress_timeout. Returns whether any was.
  bool DetectFailures(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Server replacement (scheduler_server_replacement.cc). A server was declared dead: await a
  // replacement, or fail the job.
  void ServerLost(Node& server, const std::string& why, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A server registering with a running job: it takes the lost rank (the lowest, if several),
  // or, none lost yet, waits for one (three heartbeat timeouts at most; `waited`: it did).
  void ReplaceServer(const proto::RegisterRequest& reg, Responder& responder, absl::Time now,
                     bool waited = false) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AdmitWaitingServers(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fails the job if a lost server's replacement is overdue; whether any server is awaited.
  bool AwaitingServers(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // options_.server_replace_timeout, or zero where servers are not replaced (bsp).
  absl::Duration ServerReplaceTimeout() const;
  // The heartbeat's news of lost and replaced servers.
  void AddServerNews(proto::HeartbeatReply& beat) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool WaitingOnScheduler(const Node& node) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleBarrier(const Message& request, Node& node, Responder& responder)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool InGroup(const Node& node, proto::Group group) const;
  void ReleaseBarriers() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeEndJob() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends the requests queued under mu_ for the servers: MEMBERSHIP (a worker joined) and
  // SHUTDOWN (MaybeEndJob). Called without mu_ held, so a requester that answers synchronously
  // (tests) cannot deadlock.
  void SendQueuedRequests() ABSL_LOCKS_EXCLUDED(mu_);
  void ServerAcknowledged(int rank, absl::StatusOr<Message> reply);
  void Fail(const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // EPOCH_PLAN (scheduler_epochs.cc): the plan of the epoch a worker asks for, fixed from the
  // live workers' shards if it is the first to ask.
  void HandleEpochPlan(const Message& request, const Node& node, Responder& responder)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A worker died or finished: out of the ring and the tuner.
  void WorkerLeft(const Node& node, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const SchedulerOptions options_;
  Requester* const requester_;
  const Clock clock_;
  const absl::Time started_;
  absl::Notification done_;

  mutable absl::Mutex mu_;
  std::vector<PendingRegister> pending_ ABSL_GUARDED_BY(mu_);
  std::vector<proto::TensorSpec> model_ ABSL_GUARDED_BY(mu_);
  bool rendezvous_done_ ABSL_GUARDED_BY(mu_) = false;
  // Deques: barriers keep pointers to nodes, and workers may join a running job.
  std::deque<Node> servers_ ABSL_GUARDED_BY(mu_);
  std::deque<Node> workers_ ABSL_GUARDED_BY(mu_);
  // Data shards of dead workers, for the workers that join (oldest first).
  std::deque<int> orphan_shards_ ABSL_GUARDED_BY(mu_);
  // Joining workers that want a data shard while none is free: a replacement started as soon as
  // its predecessor died registers before the death is detected. They join once a shard frees
  // up, or without one after three heartbeat timeouts.
  struct WaitingJoin {
    proto::RegisterRequest request;
    Responder responder;
    absl::Time since;
  };
  std::vector<WaitingJoin> waiting_joins_ ABSL_GUARDED_BY(mu_);
  // Servers registering to replace one whose loss is not detected yet (ReplaceServer).
  std::vector<WaitingJoin> waiting_servers_ ABSL_GUARDED_BY(mu_);
  struct PendingJoin {
    Responder responder;
    int acks_outstanding;
    // bsp and ssp: the servers' answers to the prepare are awaited; the largest so far (the
    // clock the worker joins at, once all came); whether a server could not prepare.
    bool preparing = false;
    int64_t join_clock = 0;
    bool refused = false;
  };
  absl::flat_hash_map<int, PendingJoin> pending_joins_ ABSL_GUARDED_BY(mu_);  // by new rank
  // MEMBERSHIP requests queued for SendQueuedRequests: the joining rank, the server's endpoint.
  struct MembershipNote {
    int rank;
    std::string endpoint;
    proto::Membership membership;
  };
  std::vector<MembershipNote> memberships_to_send_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int, BarrierState> barriers_ ABSL_GUARDED_BY(mu_);  // by proto::Group
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  int shutdown_acks_outstanding_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::pair<int, std::string>> shutdowns_to_send_ ABSL_GUARDED_BY(mu_);
  std::string failure_ ABSL_GUARDED_BY(mu_);
  // Requests refused because the sender's connection or role did not match its claim.
  uint64_t denied_requests_ ABSL_GUARDED_BY(mu_) = 0;
  LogLimiter deny_log_ ABSL_GUARDED_BY(mu_);
  SlotCoordinator slots_ ABSL_GUARDED_BY(mu_);
  EpochPlanBook epoch_plans_ ABSL_GUARDED_BY(mu_);
};

}  // namespace r2sp

#endif  // R2SP_SCHEDULER_SCHEDULER_CORE_H_
