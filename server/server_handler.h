// The parameter server's protocol logic: PUSH (apply on arrival, or BSP per-clock averaging),
// PULL (answered now or parked until the wanted version exists) and SHUTDOWN.
#ifndef R2SP_SERVER_SERVER_HANDLER_H_
#define R2SP_SERVER_SERVER_HANDLER_H_

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/handler.h"
#include "common/peer_checks.h"
#include "common/model_layout.h"
#include "server/clock_aggregator.h"
#include "proto/checkpoint.pb.h"
#include "server/partition_state.h"
#include "server/pull_shadows.h"
#include "server/range_pool.h"
#include "server/push_decoder.h"
#include "server/lr_schedule.h"
#include "server/sgd.h"

namespace r2sp {

struct ServerOptions {
  SgdOptions sgd;       // sgd.learning_rate is the base rate
  LrSchedule schedule;  // multiplies the base rate per update
  proto::SyncMode sync = proto::ASP;
  // Asynchronous modes (asp, ssp, r2sp): a push's scale is its fraction b_i / B of a global-batch
  // step, and the update is normalised per sample (StepForFraction), so that every mode runs the
  // same hyperparameters. false: every push is one whole SGD step on its own gradient (classic
  // ASP; the scale is ignored).
  bool per_sample_updates = true;
  // Threads that share a large partition's update and predicted weights (1: the request thread
  // alone). Results are the same bit for bit.
  int apply_threads = 1;
};

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

  // Checkpoints (server_handler_checkpoint.cc). A copy of every held partition's state, taken
  // between two requests; the global-batch steps of the least advanced partition.
  proto::ShardCheckpoint Snapshot() const;
  double Steps() const;
  // Whether every held partition has its initial value (before that, nothing to checkpoint).
  bool Initialized() const;
  // Installs a checkpoint of this server's shard before any request is served: every held
  // partition must be in it with its size. REQUIRES: after Configure().
  absl::Status Restore(const proto::ShardCheckpoint& shard);

  proto::NodeCounters counters() const;
  // A copy of one partition's weights, or nullopt if not held here (tests, checkpoints).
  std::optional<std::vector<float>> Weights(uint64_t key) const;

 private:
  struct ParkedPull {
    int64_t min_version;
    int64_t min_clock;
    float predict_fraction;  // 0: the current weights, else predicted ones (proto PullInfo)
    int predict_updates;
    proto::Codec codec;  // of the reply's payload
    int rank;            // the worker's
    uint64_t delta_base;  // FP16_DELTA: PullInfo.delta_base
    absl::Time since;
    Responder responder;
  };
  // One partition this server holds, with what its mode keeps about it.
  struct HeldPartition {
    HeldPartition(size_t n, int workers) : state(n), pushed(workers, 0) {}
    PartitionState state;
    std::unique_ptr<ClockAggregator> aggregator;  // BSP only
    // Per worker: the pushes it made (SSP bounds; in asynchronous modes a worker's clock counts
    // its pushes, so after a restore its next push sets it: pushed is past the clock of every
    // push applied). A push marked as a retry (proto PushInfo.retry) of a clock below it was
    // applied already (the worker lost the reply when its connection was reset), so it is
    // acknowledged and not applied again.
    std::vector<int64_t> pushed;
    std::vector<ParkedPull> parked_pulls;
    std::unique_ptr<PullShadows> shadows;  // once a worker pulls FP16_DELTA
    double steps = 0;  // global-batch steps applied (fractions in asynchronous modes)
    // BSP after a restore: the clock the checkpoint was aggregating. Workers resume at the
    // least advanced partition's clock, so this one may get pushes for earlier clocks, which
    // its weights hold already: they are acknowledged and dropped.
    int64_t restored_clock = 0;
    double restored_steps = 0;  // the checkpoint's steps (0: not restored)
  };

  // OK if the request came over the connection of the worker its header names.
  absl::Status CheckSender(const proto::Header& header, const Responder& responder) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OK if the request came over the scheduler's connection.
  absl::Status CheckScheduler(const Responder& responder, const char* what) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The partition a worker's PUSH or PULL is for, once its sender checked out.
  absl::StatusOr<HeldPartition*> FindPartition(const proto::Header& header,
                                               const Responder& responder)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Each request type. OK: `responder` has been answered or parked. An error: it has not
  // (HandleRequest rejects the request with that error).
  absl::Status HandlePush(Message& request, Responder& responder)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status HandlePull(Message& request, Responder& responder)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status HandleMembership(const Message& request, Responder& responder)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status HandleShutdown(const Message& request, Responder& responder)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers `pull` (parked for `waited` seconds) with the current or predicted weights.
  void AnswerPull(HeldPartition& held, ParkedPull& pull, double waited)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool PullReady(const HeldPartition& held, int64_t min_version, int64_t min_clock) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeCompleteClock(HeldPartition& held) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseParkedPulls(HeldPartition& held) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  SgdOptions SgdFor(const HeldPartition& held) const;
  // Workers joining (MEMBERSHIP from the scheduler; server_handler_membership.cc). Prepare
  // (bsp, ssp): hold BSP clocks past those being aggregated; returns the first clock a joiner
  // may take part from here. Grow: ranks up to num_workers - 1 exist now, with these routing
  // ids, taking part from membership.join_clock() (bsp, ssp); releases the hold.
  absl::StatusOr<int64_t> PrepareJoin() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status GrowWorkers(const proto::Membership& membership)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends a hold: clocks complete and parked pulls are answered as they may now.
  void ReleaseHold() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Reject(Responder& responder, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ServerOptions options_;
  const Clock clock_;
  // With options_.apply_threads > 1 (else null); outlives the partitions.
  const std::unique_ptr<RangePool> pool_;
  absl::Notification shutdown_requested_;

  mutable absl::Mutex mu_;
  bool configured_ ABSL_GUARDED_BY(mu_) = false;
  int rank_ ABSL_GUARDED_BY(mu_) = -1;
  int num_workers_ ABSL_GUARDED_BY(mu_) = 0;
  ServerPeers peers_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> live_workers_ ABSL_GUARDED_BY(mu_);
  // Per worker, the clock it takes part in BSP aggregation from (0 for the job's first
  // workers; a bsp joiner's Membership.join_clock). While a bsp join is prepared, no clock past
  // hold_after_ completes, so the joiner's clock stays ahead of every completed one.
  std::vector<int64_t> joined_at_ ABSL_GUARDED_BY(mu_);
  std::optional<int64_t> hold_after_ ABSL_GUARDED_BY(mu_);
  // Every request refused (Reject), counted and logged.
  RequestRefusals refusals_ ABSL_GUARDED_BY(mu_){"rejected"};
  absl::flat_hash_map<uint64_t, std::unique_ptr<HeldPartition>> partitions_ ABSL_GUARDED_BY(mu_);
  struct Counters {
    uint64_t bytes_pushed = 0, bytes_pulled = 0, pushes = 0, pulls = 0, repeated_pushes = 0;
  };
  Counters counters_ ABSL_GUARDED_BY(mu_);
  proto::NodeCounters CountersLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  PushDecoder decoder_ ABSL_GUARDED_BY(mu_);
};

}  // namespace r2sp

#endif  // R2SP_SERVER_SERVER_HANDLER_H_
