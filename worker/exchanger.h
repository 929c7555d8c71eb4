// One iteration's communication in the job's consistency mode, for every workload:
//   r2sp: wait for this worker's slot (reporting the iteration for the gap and the tuner; with
//      overlap it was asked for before backward ended, early_slot.h)
//   -> push the gradient, weighted b_i / B where the mode sums or applies fractions
//   -> r2sp: release the slot once the push is acknowledged (or, with slot_includes_pull,
//      after the pull; the worker's last slot takes it out of the ring)
//   -> pull the parameters as the mode allows (bsp: the next clock's; ssp: once the slowest live
//      worker is within `staleness` clocks; r2sp with lookahead: those predicted for when the
//      next gradient lands, docs/MODES.md)
//   -> hetero batching outside r2sp: REPORT the iteration.
// easgd and eawild instead take the local step and, every period, the elastic exchange
// (elastic_exchange.h; with hetero batching the difference weighted W b_i / B, and every
// iteration REPORTed); evaluations then see the centre (EvaluationParams).
// The Exchanger is the one owner of the batch-size channel: the first size comes from the
// address book, later ones from r2sp slot grants or REPORT replies.
#ifndef R2SP_WORKER_EXCHANGER_H_
#define R2SP_WORKER_EXCHANGER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/scheduler_client.h"
#include "worker/bucket_pusher.h"
#include "worker/early_slot.h"
#include "worker/elastic_exchange.h"
#include "worker/host_gradient.h"
#include "worker/ps_client.h"
#include "worker/run_log.h"

namespace r2sp {

// The job's mode, as the address book and the worker's flags set it. Fixed for the job.
struct ExchangerOptions {
  proto::SyncMode sync = proto::ASP;
  int staleness = 0;  // ssp
  // r2sp: release the slot after the pull (the R2SP paper) instead of once the push is
  // acknowledged (the default: the next worker's push then overlaps this one's pull).
  bool slot_includes_pull = false;
  // The scheduler tunes every worker's batch size (scheduler/batch_tuner.h).
  bool hetero_batching = false;
  // B, the samples of one step of all workers; pushes carry b_i / B in asynchronous modes and
  // with hetero batching. 0: pushes are not weighted (the synthetic workload).
  int global_batch = 0;
  int initial_batch = 0;  // the batch size until the scheduler says otherwise
  // r2sp: pull the weights predicted for after the other `workers - 1` pushes.
  bool lookahead = false;
  int workers = 1;
  // The encoding of the training pulls' replies (pushes: PsClientOptions::push_codec).
  proto::Codec pull_codec = proto::FP32;
  // Sparse push codecs: the density the pushes reach (the codec's ratio), from dense pushes at
  // the start over this many epochs (0: the target from the first push); see WarmupDensity.
  double push_density = 1.0;
  double density_warmup_epochs = 0.0;
  // Push partitions while backward runs (bucket_pusher.h), in buckets of this many fp32 bytes.
  // r2sp: the push still waits for the slot, which the worker asks for before backward ends
  // (early_slot.h).
  bool overlap = false;
  size_t bucket_bytes = 4 << 20;
  // Pull each partition as soon as its push is acknowledged (PsClient::PushThenPull) instead
  // of after all the pushes. With overlap only where params_staged (overlap's pushes run during
  // backward, which must not read parameters a pull overwrites).
  bool early_pulls = false;
  // With early pulls and overlap: at most this many pulls in flight until every push of the
  // iteration is acknowledged (gated_pulls.h; 0: each as its push is acknowledged).
  int early_pulls_in_flight = 0;
  // The compute reads its own copy of the parameters, taken before its backward (a GPU's: the
  // Python client's CUDA models), so pulls may land in the host's while backward runs.
  bool params_staged = false;
  // With overlap: the pull runs while the next forward does. Exchange returns once the pull is
  // sent; the next forward waits for each part of the parameters as it reaches it
  // (ParamsNeeded), and the next Exchange (or FinishPull) for the rest. Not when the next
  // compute evaluates, on the worker's last iteration, or when the slot covers the pull.
  bool overlap_pulls = false;
  // easgd, eawild: the local step and the elastic exchange (REQUIRES there: no overlap).
  ElasticOptions elastic;

  // Whether Exchange may return with the pull still running (the next compute must then call
  // Exchanger::ParamsNeeded before reading each part of the parameters).
  bool overlaps_pulls() const { return overlap && overlap_pulls && !slot_includes_pull; }
};

// What one iteration hands over besides its metrics.
struct ExchangeStep {
  HostGradient grads;  // REQUIRES: unchanged until Exchange returns
  float* params = nullptr;       // overwritten with the pulled parameters
  absl::Time computed;           // when the compute phase ended
  int64_t iterations_left = 0;   // this one included; 1 marks the worker's last iteration
  // The next compute is an evaluation, which must see the current weights (no lookahead).
  bool evaluation_next = false;
  // The next compute calls ParamsNeeded before it reads each part of the parameters, so the
  // pull may still run when Exchange returns (overlaps_pulls()).
  bool forward_waits = false;
};

// What the training loop knows of an iteration before its compute.
struct ComputeStart {
  int64_t clock = 0;
  int batch = 0;
  double epochs_done = 0;       // fractional, this iteration excluded (the density warm-up)
  int64_t iterations_left = 0;  // as in ExchangeStep
  bool evaluation_next = false;  // as in ExchangeStep
  float* params = nullptr;      // as in ExchangeStep: where pulls that follow pushes land
};

// Thread-safety: one training thread calls Exchange and next_batch. Borrowed pointers outlive
// the exchanger; `log` may be null.
class Exchanger {
 public:
  Exchanger(const ExchangerOptions& options, PsClient* ps, SchedulerClient* scheduler,
            RunLog* log);
  ~Exchanger();

  // Before each compute: sets the push density (warm-up) and, with overlap, readies the early
  // pushes (and r2sp's early slot); with early pulls on staged parameters too, each partition
  // is pulled into `start.params` once its push is acknowledged.
  void BeginCompute(const ComputeStart& start);
  // Whether pushes start during backward: then the training loop forwards the workload's
  // GradientReady reports to GradientReady (REQUIRES: overlaps_backward()).
  bool overlaps_backward() const { return pusher_ != nullptr; }
  void GradientReady(HostGradient grads, int64_t offset, int64_t count);

  // `m` holds the iteration's clock, batch and compute_seconds; Exchange fills in its wait,
  // gap, push and pull fields and adds wait (r2sp), push and pull spans to the log. Pushes
  // begun during backward are finished here. A pull left running by the previous Exchange is
  // finished first: its time is this iteration's pull time (the part the compute waited for
  // included), and this iteration's own pull may be left running in turn.
  absl::Status Exchange(const ExchangeStep& step, IterationMetrics* m);

  // Whether Exchange may return with the pull still running (options overlap_pulls, with the
  // slot not covering the pull); the next compute must then call ParamsNeeded before reading
  // the parameters (ExchangeStep::forward_waits).
  bool overlaps_pulls() const;
  // During compute: blocks until [offset, offset + count) of the parameters is pulled.
  void ParamsNeeded(int64_t offset, int64_t count);
  // The time waited for a pull left running (ParamsNeeded, FinishPull) since the last Exchange,
  // which counts it as that iteration's pull time and starts again from zero.
  absl::Duration pull_stall() const { return stall_; }
  // Waits for the rest of a pull left running, if any; its first error. Before anything reads
  // the parameters whole (an evaluation, the end of the run).
  absl::Status FinishPull();

  // The parameters an evaluation after this iteration sees: `params`, or in elastic modes the
  // centre, pulled now (valid until the next call).
  absl::StatusOr<const float*> EvaluationParams(const float* params);

  // The batch size for the next iteration.
  int next_batch() const { return next_batch_->load(); }

  // An epoch trained by `workers` live workers of the job's (the others died; proto
  // EpochPlan), with fixed batches: B is their batches' sum from now on, so that a round of
  // their pushes still makes one step, and r2sp's lookahead counts the others among them.
  // With hetero batching B stays (the tuner shares it out among the live workers).
  void SetLiveWorkers(int workers);

 private:
  // b_i / B, or 0 (unweighted: bsp averages, or the synthetic workload).
  float PushScale(int batch) const;
  // easgd, eawild: the weight of this worker's elastic difference in the centre, W b_i / B with
  // hetero batching, else 1.
  float DifferenceWeight(int batch) const;
  PullOptions PullFor(int64_t clock, int batch, bool evaluation_next) const;
  // Whether pulls follow the pushes during backward (early pulls with overlap, params_staged).
  bool pulls_follow_pushes() const;
  // r2sp: waits for the slot (asking now, or early with overlap); *granted: when the push may
  // start (never before the compute ended).
  absl::StatusOr<proto::SlotGrant> AwaitSlot(const ExchangeStep& step,
                                             const IterationMetrics& m, absl::Time* granted);
  // The iteration's push: finishing the early one (setting m->early_partitions), or the whole
  // gradient now. Sets *started to when the push began (before `now` when it overlapped). With
  // early pulls, sets *pull to the pulls it started (each as its partition's push is done).
  absl::Status Push(const ExchangeStep& step, IterationMetrics* m, absl::Time now,
                    absl::Time* started, std::optional<Ticket>* pull);

  const ExchangerOptions options_;
  int global_batch_;  // options_.global_batch, or as SetLiveWorkers set it
  int workers_;       // options_.workers, or as SetLiveWorkers set it
  PsClient* const ps_;
  SchedulerClient* const scheduler_;
  RunLog* const log_;
  // Shared with REPORT callbacks, whose replies may arrive after the exchanger is gone.
  const std::shared_ptr<std::atomic<int>> next_batch_;
  // The last iteration, as the next SLOT or REPORT describes it; comm_seconds is the tuner's
  // fixed per-iteration cost.
  SlotReport previous_;
  // easgd, eawild: the rest of Exchange.
  absl::Status ExchangeElastic(const ExchangeStep& step, IterationMetrics* m);

  std::unique_ptr<ElasticExchange> elastic_;  // easgd, eawild
  std::unique_ptr<BucketPusher> pusher_;  // with overlap
  std::unique_ptr<EarlySlot> early_slot_;  // r2sp with overlap; destroyed before pusher_
  // The pull left running into the next compute (overlap_pulls), sent at pull_sent_.
  std::optional<Ticket> pending_pull_;
  absl::Time pull_sent_;
  // What this iteration waited for that pull: in ParamsNeeded and FinishPull, and of it the
  // time the pull was parked on a server.
  absl::Duration stall_;
  double stall_parked_seconds_ = 0;
};

}  // namespace r2sp

#endif  // R2SP_WORKER_EXCHANGER_H_
