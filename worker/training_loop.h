// The worker's one training loop, for every workload and mode, as a class (TrainingLoop):
//   compute (the workload's gradient; stretched when emulating a slower machine or an
//   accelerator) -> exchange (exchanger.h: slot, push, pull, reports) -> metrics, timeline
//   spans and a progress line; after every epoch, the workload's test evaluation if it has one.
// The batch size of each iteration is the exchanger's (fixed, or tuned by the scheduler). With
// --overlap the workload's gradient-ready reports go to the exchanger during compute (held and
// replayed over the stretched time when emulating: emulated_step.h), so pushes start during
// backward, and the workload's forward waits for each part of the parameters the pull is still
// writing (Exchanger::ParamsNeeded) where the workload can (paced as the emulated forward when
// emulating); that wait counts as pull time, not compute.
// RunTrainingLoop is the one-call form.
#ifndef R2SP_WORKER_TRAINING_LOOP_H_
#define R2SP_WORKER_TRAINING_LOOP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/emulated_step.h"
#include "worker/exchanger.h"
#include "worker/run_log.h"
#include "worker/workload.h"

namespace r2sp {

struct LoopOptions {
  int rank = 0;
  int epochs = 1;
  // The same on every worker, so that clocks line up.
  int64_t steps_per_epoch = 1;
  int64_t max_steps = 0;  // stop after this many steps in all (0: no limit)
  // A job resumed from checkpoints: the steps done before (the loop starts in the epoch and
  // at the place in it where step first_step falls; clocks go on from there).
  int64_t first_step = 0;
  // Emulation of a slower machine: the compute phase is stretched to this many times its
  // length (by sleeping after it). 1 = off.
  double compute_slowdown = 1.0;
  // Emulation of an accelerator: the compute phase lasts at least this many milliseconds per
  // sample of the batch (by sleeping after the real compute). 0 = off.
  double emulate_ms_per_sample = 0.0;
  int log_every = 50;  // progress line every this many steps (0: never)
  // Workloads that evaluate: also every this many steps (counted over the whole run), besides
  // after each epoch (0: after each epoch only).
  int64_t eval_every = 0;
  // Epochs planned by the scheduler (survivors take over dead workers' data; proto EpochPlan):
  // called before each epoch, with whether the run starts in it, and, for a run that starts at
  // first_step > 0, for the epochs before it too, to find where that step falls. It sets the
  // workload's data up for the epoch and returns the epoch's steps, which then stand in for
  // steps_per_epoch. Empty: every epoch has steps_per_epoch steps.
  std::function<absl::StatusOr<int64_t>(int epoch, bool starting)> plan_epoch;
  // Asked after every step: true ends the run there (the worker leaves the job: SIGTERM,
  // preemption), with LoopResult::left set. Empty: never.
  std::function<bool()> leave_requested;
  // Called once when the run's steps are done (not when it left), with the steps in all, before
  // the run's final evaluation, which then follows it instead of ending the last epoch: the
  // worker passes the final barrier there and pulls the final parameters into `params` (so the
  // evaluation is of the final model, by whichever worker evaluates once the membership
  // settled: final_sync.h). Empty: the final evaluation ends the last epoch.
  std::function<absl::Status(int64_t steps)> settle;
};

struct LoopResult {
  int64_t steps = 0;           // in all, first_step included
  int64_t samples = 0;
  int epochs = 0;              // completed
  double seconds = 0;          // wall time of the loop
  double compute_seconds = 0;  // compute phases (with any emulated slowdown)
  double wait_seconds = 0;     // slot waits and parked pulls
  double push_seconds = 0;
  double pull_seconds = 0;     // including parked time
  double last_epoch_loss = 0;  // mean over the last epoch's steps
  double test_accuracy = -1;   // after the last epoch, if evaluated
  int final_batch = 0;
  int64_t early_partitions = 0;  // --overlap: partition pushes begun during backward, in all
  int64_t overlapped_pulls = 0;  // --overlap: pulls left running into the next forward
  bool left = false;             // ended early: leave_requested (no evaluation after it)
};

// One run of the loop over a workload, an exchanger and the parameters they share.
//
// Owns what a run carries from step to step: the LoopResult being accounted, the start time,
// the progress line's window and the EmulatedStep that reports and reads pass through. Borrows the
// workload, the exchanger, `params` (the model's size; holds the last pulled parameters once
// Run returns) and `log` (may be null): they must outlive the TrainingLoop. While Run runs, the
// workload calls back into the loop (gradient-ready reports, the parameters forward needs);
// Run detaches both callbacks before it returns, error or not.
//
// Thread-safety: not thread-safe. One thread (the workload's training thread) calls Run, once
// per TrainingLoop; the workload's callbacks come within ComputeGradient (workload.h), so
// the EmulatedStep it owns needs no lock.
class TrainingLoop {
 public:
  TrainingLoop(const LoopOptions& options, Workload* workload, Exchanger* exchanger,
               float* params, RunLog* log);
  ~TrainingLoop();
  TrainingLoop(const TrainingLoop&) = delete;
  TrainingLoop& operator=(const TrainingLoop&) = delete;

  // Trains epoch after epoch from options.first_step until options.epochs (or max_steps) are
  // done, and returns what the run did. The first error (an epoch plan, the workload, the
  // exchange, an evaluation) ends the run and is returned. REQUIRES: called once.
  absl::StatusOr<LoopResult> Run();

 private:
  class Progress;
  struct Epoch;

  // The workload's callbacks into step_ (--overlap, overlapped pulls), and their removal.
  void Attach();
  void Detach();
  // The steps of epoch `epoch` after the first (planned, or steps_per_epoch).
  absl::StatusOr<int64_t> EpochSteps(int epoch);
  // Runs `epoch`'s steps and its evaluation; false when the run is over before it (nothing
  // left to do in it).
  absl::StatusOr<bool> RunEpoch(Epoch* epoch);
  // Step `s` of the epoch: compute, exchange, accounting, and a mid-epoch evaluation if due.
  absl::Status RunStep(Epoch* epoch, int64_t s);
  // The workload's gradient with any emulated stretch; fills m's batch, loss and compute time.
  // `t0`/`t1`: when the compute began and ended.
  absl::StatusOr<ComputedStep> Compute(int batch, IterationMetrics* m, absl::Time* t0,
                                       absl::Time* t1);
  // A finished step's metrics into result_ and the epoch's loss.
  void Account(const IterationMetrics& m, Epoch* epoch);
  // The test evaluation after result_.steps steps, in `epoch` (0-based), with `train_loss` the
  // epoch's mean loss so far; `epoch_end` when the epoch is done.
  absl::Status Evaluate(int epoch, bool epoch_end, double train_loss);

  const LoopOptions options_;
  Workload* const workload_;
  Exchanger* const exchanger_;
  float* const params_;
  RunLog* const log_;

  bool ran_ = false;
  LoopResult result_;
  absl::Time start_;
  std::unique_ptr<Progress> progress_;
  // With --overlap or overlapped pulls: backward's reports and forward's reads pass through it.
  std::unique_ptr<EmulatedStep> step_;
  bool forward_waits_ = false;  // the workload says which parameters forward needs
  // The final epoch's evaluation, left for after options_.settle: that epoch (0-based), or -1.
  int final_evaluation_epoch_ = -1;
};

// TrainingLoop(options, workload, exchanger, params, log).Run().
absl::StatusOr<LoopResult> RunTrainingLoop(const LoopOptions& options, Workload* workload,
                                           Exchanger* exchanger, float* params, RunLog* log);

}  // namespace r2sp

#endif  // R2SP_WORKER_TRAINING_LOOP_H_
