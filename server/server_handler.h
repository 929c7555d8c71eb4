// The parameter server's protocol logic, one handler per message type: PUSH (apply on arrival,
// or BSP per-clock averaging), PULL (answered now or parked until the wanted version exists),
// MEMBERSHIP (workers joining) and SHUTDOWN. The state belongs to small classes it dispatches
// to: PartitionTable (held partitions and parked pulls), PullReplier (a pull's reply),
// WorkerRoster (live and joining workers, the bsp join hold), shard_checkpoint.h (snapshot and
// restore); payloads are decoded by common/wire.
#ifndef R2SP_SERVER_SERVER_HANDLER_H_
#define R2SP_SERVER_SERVER_HANDLER_H_

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/handler.h"
#include "common/peer_checks.h"
#include "common/model_layout.h"
#include "common/wire/optimizer_runs.h"
#include "common/wire/push_frames.h"
#include "proto/checkpoint.pb.h"
#include "server/lr_schedule.h"
#include "server/partition_table.h"
#include "server/pull_reply.h"
#include "server/range_pool.h"
#include "server/script_optimizer.h"
#include "server/server_options.h"
#include "server/sgd.h"
#include "server/worker_roster.h"

namespace r2sp {

// Who may send a server what, as registration told it: SHUTDOWN and MEMBERSHIP come over the
// scheduler's connection only, PUSH and PULL from worker rank r over worker r's only.
struct ServerPeers {
  std::string scheduler_id;             // routing id (RegisterReply.scheduler_id)
  std::vector<std::string> worker_ids;  // by rank (AddressBook workers' routing_id)
};

// Thread-safety: Configure() and the accessors may be called from any thread; the
// RequestHandler methods run on the transport's I/O thread.
class ServerHandler : public RequestHandler {
 public:
  using Clock = std::function<absl::Time()>;
  // `clock` tells the time for how long pulls were parked (tests pass a fake one).
  // REQUIRES: options.Validate() is OK (checked: invalid options are a programmer error, as
  // for SchedulerCore; ServerNode and the benchmarks validate before they build one).
  explicit ServerHandler(const ServerOptions& options, Clock clock = &absl::Now);

  // Installs the layout once registration told us our rank and the job's peers (one worker per
  // entry of peers.worker_ids); requests before this get NOT_READY. REQUIRES: called once.
  void Configure(int rank, const ServerPeers& peers, const ModelLayout& layout);

  void HandleRequest(Message request, Responder responder) override;

  // Workers that died or finished (from the scheduler's heartbeat replies): BSP clocks and SSP
  // bounds no longer wait for them. Thread-safe; idempotent.
  void SetDepartedWorkers(const std::vector<int>& departed);

  // Notified when the scheduler asked us to shut down (after the reply was queued).
  absl::Notification& shutdown_requested() { return shutdown_requested_; }

  // Checkpoints (shard_checkpoint.h). A copy of every held partition's state, taken
  // between two requests; the global-batch steps of the least advanced partition.
  proto::ShardCheckpoint Snapshot() const;
  double Steps() const;
  // Whether every held partition has its initial value (before that, nothing to checkpoint).
  bool Initialized() const;
  // Checkpoints every `every` steps (> 0): once Steps() reaches `first`, and then each `every`
  // steps past the last snapshot, the request that got them there takes the Snapshot, so it
  // holds the state at that step however late the checkpointing thread comes for it.
  void SnapshotAtSteps(double first, double every);
  // The snapshot SnapshotAtSteps took (the newest, if several were not taken yet), waiting up
  // to `timeout` for one; nullopt if none came.
  std::optional<proto::ShardCheckpoint> TakeStepSnapshot(absl::Duration timeout);
  // Installs a checkpoint of this server's shard before any request is served: every held
  // partition must be in it with its size. REQUIRES: after Configure().
  absl::Status Restore(const proto::ShardCheckpoint& shard);

  proto::NodeCounters counters() const;
  // A copy of one partition's weights, or nullopt if not held here (tests, checkpoints).
  std::optional<std::vector<float>> Weights(uint64_t key) const;

 private:
  // OK if the request came over the connection of the worker its header names.
  absl::Status CheckSender(const proto::Header& header, const Responder& responder) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OK if the request came over the scheduler's connection.
  absl::Status CheckScheduler(const Responder& responder, const char* what) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The partition a worker's PUSH or PULL is for, once its sender checked out and it was meant
  // for this server's rank (UNAVAILABLE otherwise: the worker's routing is stale; it retries).
  absl::StatusOr<HeldPartition*> FindPartition(const proto::Header& header,
                                               const Responder& responder)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Each request type. OK: `responder` has been answered or parked. An error: it has not
  // (HandleRequest rejects the request with that error).
  absl::Status HandlePush(Message& request, Responder& responder)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status HandlePull(Message& request, Responder& responder)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status HandleMembership(Message& request, Responder& responder)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status HandleShutdown(Message& request, Responder& responder)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OPTIMIZER_STATE (server_handler_state.cc): a partition's state, or its initial value and
  // state from a script's checkpoint.
  absl::Status HandleOptimizerState(Message& request, Responder& responder)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OK if a gradient or skip push may reach `held`: it has its initial value, and the push's
  // scale is in [0, 1].
  absl::Status CheckGradientPush(const HeldPartition& held, const proto::Header& header) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A skip push (proto PushInfo.skip) of `held`: the worker's arrival for its clock, nothing
  // applied. InvalidArgument with values, as an init, or in easgd and eawild.
  absl::Status HandleSkip(const Message& request, HeldPartition& held, Responder& responder)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A gradient push (not init) of `held` that its checks let through: applied now, or added to
  // its BSP clock's sum. `runs`, the script's optimizer the push carried (empty: none), become
  // the partition's from this update on.
  absl::Status ApplyPush(HeldPartition& held, const proto::Header& header,
                         const wire::GradientView& grad, std::vector<wire::OptimizerRun> runs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers `pull` (parked for `waited` seconds) with the current or predicted weights.
  void AnswerPull(HeldPartition& held, ParkedPull& pull, double waited)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // easgd and eawild: an elastic difference for the centre: added to its round's sum (easgd)
  // or to the weights now (eawild), without the optimizer.
  absl::Status AddElastic(HeldPartition& held, const proto::Header& header,
                          const wire::GradientView& grad) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeCompleteClock(HeldPartition& held) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseParkedPulls(HeldPartition& held) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a departure or the end of a join hold: every partition's clock may complete, its
  // parked pulls may be answered.
  void Resume() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // SnapshotAtSteps' snapshot, if the steps reached the next one's (`updated`: the partition
  // the request just moved on; null: any may have).
  void MaybeSnapshotAtSteps(const HeldPartition* updated) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  SgdOptions SgdFor(const HeldPartition& held) const;
  // The MEMBERSHIP that adds workers: ranks up to num_workers - 1 exist now, with these routing
  // ids, taking part from membership.join_clock() (bsp, ssp); ends a join hold.
  absl::Status GrowWorkers(const proto::Membership& membership)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends a join hold, if any: clocks complete and parked pulls are answered as they may now.
  void ReleaseHold() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Reject(Responder& responder, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ServerOptions options_;
  const Clock clock_;
  // With options_.apply_threads > 1 (else null); outlives the partitions.
  const std::unique_ptr<RangePool> pool_;
  const PullReplier replier_;
  absl::Notification shutdown_requested_;

  mutable absl::Mutex mu_;
  bool configured_ ABSL_GUARDED_BY(mu_) = false;
  int rank_ ABSL_GUARDED_BY(mu_) = -1;
  int num_workers_ ABSL_GUARDED_BY(mu_) = 0;
  ServerPeers peers_ ABSL_GUARDED_BY(mu_);
  WorkerRoster roster_ ABSL_GUARDED_BY(mu_);
  // Every request refused (Reject), counted and logged.
  RequestRefusals refusals_ ABSL_GUARDED_BY(mu_){"rejected"};
  PartitionTable partitions_ ABSL_GUARDED_BY(mu_);
  struct Counters {
    uint64_t bytes_pushed = 0, bytes_pulled = 0, pushes = 0, pulls = 0, repeated_pushes = 0;
  };
  Counters counters_ ABSL_GUARDED_BY(mu_);
  proto::NodeCounters CountersLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  proto::ShardCheckpoint SnapshotLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the server's own SGD keeps a momentum (checkpointed and pulled with the state).
  bool KeepsOwnMomentum() const;
  wire::PushDecoder decoder_ ABSL_GUARDED_BY(mu_);
  // SnapshotAtSteps: the steps of the next snapshot and between two (0: none), the one taken.
  double snapshot_due_ ABSL_GUARDED_BY(mu_) = 0;
  double snapshot_every_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<proto::ShardCheckpoint> step_snapshot_ ABSL_GUARDED_BY(mu_);
};

}  // namespace r2sp

#endif  // R2SP_SERVER_SERVER_HANDLER_H_
