// The scheduler's protocol logic: SchedulerCore takes every request and tick, holds the one
// mutex, and dispatches to one handler per message type, which work with the classes that own
// the scheduler's state (in the style of leveldb's DBImpl over VersionSet and MemTable):
//   NodeTable           servers and workers, their states, the address book, the sender check
//   Membership          every REGISTER: the Rendezvous, workers joining the running job
//                       (JoinCoordinator, which keeps orphaned data shards), servers replacing
//                       lost ones (ServerReplacement); the replies (register_replies.h)
//   FailureDetector     nodes declared dead for silence, workers for stalled progress
//   BarrierBook         barriers by group
//   SlotCoordinator     r2sp slots and the batch tuner
//   EpochPlanBook       epoch plans (--absorb_orphaned_shards)
//   SchedulerMetrics    its own measurements (registration, heartbeats, barriers, removals)
//   JobReportJson       the stats JSON (ReportJson)
// SchedulerCore itself keeps the end of the job (every worker finished or dead -> SHUTDOWN to
// every live server) and sends what the others queue for the servers.
#ifndef R2SP_SCHEDULER_SCHEDULER_CORE_H_
#define R2SP_SCHEDULER_SCHEDULER_CORE_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/handler.h"
#include "common/peer_checks.h"
#include "scheduler/barrier_book.h"
#include "scheduler/batch_tuner.h"
#include "scheduler/epoch_plans.h"
#include "scheduler/failure_detector.h"
#include "scheduler/membership.h"
#include "scheduler/node_table.h"
#include "scheduler/scheduler_metrics.h"
#include "scheduler/scheduler_options.h"
#include "scheduler/slot_coordinator.h"
#include "scheduler/slot_planner.h"

namespace r2sp {

// Thread-safety: the RequestHandler methods run on the I/O thread; done(), failure() and
// ReportJson() may be called from any thread. Every part's state is guarded by mu_.
class SchedulerCore : public RequestHandler {
 public:
  using Clock = std::function<absl::Time()>;
  // `requester` (borrowed; outlives this) sends SHUTDOWN to the servers. `clock` tells the
  // time (tests pass a fake one).
  SchedulerCore(const SchedulerOptions& options, Requester* requester, Clock clock = &absl::Now);

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
  // A handler of one message type from a registered, live node that is no joiner.
  using NodeHandler = absl::Status (SchedulerCore::*)(const Message& request, Node& node,
                                                      Responder& responder, absl::Time now);

  // The handlers (REGISTER: Membership::Register). OK: `responder` has been answered or
  // parked. An error: it has not (HandleRequest answers it; PERMISSION_DENIED counts as a
  // refusal). HandleFromNode takes everything but REGISTER: the sender must be a registered,
  // live node, and dispatches by type.
  absl::Status HandleFromNode(const Message& request, Responder& responder, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The handler of a node's request type, or null.
  static NodeHandler HandlerFor(proto::MsgType type);
  absl::Status HandleHeartbeat(const Message& request, Node& node, Responder& responder,
                               absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status HandleBarrier(const Message& request, Node& node, Responder& responder,
                             absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status HandleFinish(const Message& request, Node& node, Responder& responder,
                            absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status HandleSlot(const Message& request, Node& node, Responder& responder, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status HandleRelease(const Message& request, Node& node, Responder& responder,
                             absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // EPOCH_PLAN: the plan of the epoch a worker asks for, fixed from the live workers' shards
  // if it is the first to ask (a dealt-out shard is no longer free for a joiner).
  absl::Status HandleEpochPlan(const Message& request, Node& node, Responder& responder,
                               absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status HandleReport(const Message& request, Node& node, Responder& responder,
                            absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // LEAVE: a worker stopping (SIGTERM, preemption) is dead from now on, as if its heartbeats
  // had stopped a heartbeat timeout ago.
  absl::Status HandleLeave(const Message& request, Node& node, Responder& responder,
                           absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Declares nodes dead (FailureDetector) and acts on it; whether any was.
  bool DetectFailures(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A worker died or finished: out of the ring and the tuner.
  void WorkerLeft(const Node& node, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A worker died (declared dead, or it left): WorkerLeft, its removal timed (SchedulerMetrics;
  // `last_seen`: its last message), and its data shard orphaned.
  void WorkerDied(const Node& node, absl::Time last_seen, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Releases the barriers complete now; `started`: when handling the event that may have
  // completed them began (for SchedulerMetrics).
  void ReleaseBarriers(absl::Time started) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeEndJob() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends the requests queued under mu_ for the servers: MEMBERSHIP (a worker joins) and
  // SHUTDOWN (MaybeEndJob). Called without mu_ held, so a requester that answers synchronously
  // (tests) cannot deadlock.
  void SendQueuedRequests() ABSL_LOCKS_EXCLUDED(mu_);
  void ServerKnowsJoin(int rank, absl::StatusOr<Message> reply) ABSL_LOCKS_EXCLUDED(mu_);
  void ServerAcknowledged(int rank, absl::StatusOr<Message> reply) ABSL_LOCKS_EXCLUDED(mu_);
  void Fail(const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const SchedulerOptions options_;
  Requester* const requester_;
  const Clock clock_;
  const absl::Time started_;
  const FailureDetector failure_detector_;
  absl::Notification done_;

  mutable absl::Mutex mu_;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_tick_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int shutdown_acks_outstanding_ ABSL_GUARDED_BY(mu_) = 0;
  // SHUTDOWN requests queued for SendQueuedRequests: the server's rank and endpoint.
  std::vector<std::pair<int, std::string>> shutdowns_to_send_ ABSL_GUARDED_BY(mu_);
  std::string failure_ ABSL_GUARDED_BY(mu_);
  // Requests refused because the sender's connection or role did not match its claim.
  RequestRefusals refusals_ ABSL_GUARDED_BY(mu_){"denied"};
  NodeTable nodes_ ABSL_GUARDED_BY(mu_);
  BarrierBook barriers_ ABSL_GUARDED_BY(mu_);
  SlotCoordinator slots_ ABSL_GUARDED_BY(mu_);
  EpochPlanBook epoch_plans_ ABSL_GUARDED_BY(mu_);
  SchedulerMetrics metrics_ ABSL_GUARDED_BY(mu_);
  // Borrows nodes_, slots_ and barriers_ (declared before it, so they outlive it).
  Membership membership_ ABSL_GUARDED_BY(mu_);
};

}  // namespace r2sp

#endif  // R2SP_SCHEDULER_SCHEDULER_CORE_H_
