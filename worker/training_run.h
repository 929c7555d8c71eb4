// A worker's training run, one step at a time, driven by the caller's thread: the C++ trainers'
// loop (training_loop.h) and the Python client's script (script_trainer.h) call the same steps.
//   Next(): the next step (epoch plans and the epoch's data set up when an epoch begins; the
//     exchanger readied for the step's compute: r2sp's early slot, overlap's pushes);
//   during the caller's compute: GradientReady (backward finished part of the gradient; with
//     --overlap its pushes start) and ParamsNeeded (forward is about to read part of the
//     parameters that an overlapped pull may still be writing);
//   Complete(): the computed gradient is exchanged (slot, push, pull: exchanger.h), the step
//     accounted (metrics, timeline, progress line);
//   then, when evaluation_due(), the caller may evaluate (EvaluationParams) and report it
//     (Evaluated); after the run's last step the run settles (the final barrier and pull) first;
//   Finish(): what the run did.
// Emulation of a slower machine (--compute_slowdown, --emulate_ms_per_sample) is a pacer that
// exists only when asked for (emulated_step.h): it then holds backward's reports and stretches
// the compute; otherwise reports and reads go straight to the exchanger.
#ifndef R2SP_WORKER_TRAINING_RUN_H_
#define R2SP_WORKER_TRAINING_RUN_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/emulated_step.h"
#include "worker/exchanger.h"
#include "worker/loop_options.h"
#include "worker/run_log.h"
#include "worker/workload.h"

namespace r2sp {

// The step the caller computes next.
struct RunStep {
  int64_t clock = 0;
  int epoch = 0;            // 0-based
  int64_t index = 0;        // in the epoch, 0-based
  int64_t epoch_steps = 0;  // the epoch's steps (the run's last epoch: up to its last step)
  int batch = 0;            // the samples to compute (the scheduler may tune it)
};

// What the run asks of the caller's data and model.
struct RunHooks {
  // Before an epoch's first step: the epoch, its steps, and the steps of it to pass over (a
  // resumed run starting inside it) at `batch` samples each. Empty: nothing to do.
  std::function<void(int epoch, int64_t steps, int64_t skip, int batch)> start_epoch;
  // Whether this worker evaluates after epochs (and every eval_every steps). Empty: never.
  std::function<bool()> evaluates;
};

// Not thread-safe: one thread drives the run (Next, Complete, Evaluated, Finish);
// GradientReady and ParamsNeeded come from that thread or, during its compute, from a thread
// it waits for (autograd's). Borrows the exchanger, `params` (the model's size: each pull lands
// there) and `log` (may be null), which must outlive the run.
class TrainingRun {
 public:
  // `forward_waits`: the caller's forward calls ParamsNeeded before it reads each part of the
  // parameters, so pulls may run on into the next step (Exchanger::overlaps_pulls).
  TrainingRun(const LoopOptions& options, Exchanger* exchanger, float* params, RunLog* log,
              RunHooks hooks, bool forward_waits);
  ~TrainingRun();
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  // The next step, or nullopt once the run is over (its steps done, or the worker leaving:
  // LoopOptions::leave_requested), after which the run has settled. An evaluation due and not
  // reported is passed over. FailedPrecondition while a step is out (Next without Complete).
  absl::StatusOr<std::optional<RunStep>> Next();
  bool step_out() const { return step_out_; }
  // During the step's compute; nothing when the exchanger does not overlap backward.
  void GradientReady(HostGradient grads, int64_t offset, int64_t count);
  // During the step's compute; nothing without forward waits or a pull left running.
  void ParamsNeeded(int64_t offset, int64_t count);
  bool forward_waits() const { return forward_waits_; }
  // Whether a pacer emulates a slower machine (--compute_slowdown, --emulate_ms_per_sample).
  bool paces() const { return pacer_ != nullptr; }
  // The step's gradient is computed (`step.grads`, unchanged until this returns): exchanges
  // it; the pulled parameters are in `params` when it returns (or, with an overlapped pull, as
  // ParamsNeeded says). FailedPrecondition without a step out.
  absl::Status Complete(const ComputedStep& step);

  // After Complete: an evaluation of the model is due (after an epoch, every eval_every steps,
  // or the run's final one, after it settled) on this worker.
  bool evaluation_due() const { return due_.has_value(); }
  // The parameters the due evaluation sees: `params` (whole), or in elastic modes the centre.
  absl::StatusOr<const float*> EvaluationParams();
  // The due evaluation's outcome (nullopt: none this time; nothing is logged).
  void Evaluated(const std::optional<TestEvaluation>& evaluation);

  bool over() const { return over_; }
  // What the run did. FailedPrecondition before it is over.
  absl::StatusOr<LoopResult> Finish();

 private:
  class Progress;
  struct Epoch {
    int number = 0;      // 0-based
    int64_t begins = 0;  // the step it begins at, counted over the run
    int64_t steps = 1;
    int64_t first = 0;   // its first step to run (> 0: a resumed run starting inside it)
    int64_t last = 0;    // the run's last step as far as it is known
    int64_t next = 0;    // its next step to run
    double loss = 0;     // the sum of its steps' losses
    int64_t done = 0;    // its steps run
  };
  struct Due {
    int epoch = 0;
    bool epoch_end = false;
    double train_loss = 0;
  };
  // What Next decided about the step out.
  struct Out {
    RunStep step;
    bool epoch_end = false;
    bool evaluate_now = false;  // mid-epoch
    bool evaluation_next = false;
    int64_t iterations_left = 0;
    absl::Time started;
    absl::Duration stalled_before;  // the exchanger's pull stall when the compute began
  };

  absl::Status Start();
  // Sets epoch `number` up (epoch_.begins and .steps set; `run_starts`: the run's first);
  // false when the run has nothing left to do in it.
  absl::StatusOr<bool> EnterEpoch(int number, bool run_starts);
  // Ends the run: the rest of a pull, and the settle (the final barrier and pull).
  absl::Status End();
  // The compute's end: a pull it waited for, the emulated stretch; fills m's compute fields.
  absl::Status FinishCompute(const ComputedStep& step, IterationMetrics* m, absl::Time* end);
  // When the step's compute began: when it was handed out, or earlier where the caller says.
  absl::Time ComputeBegan(const ComputedStep& step) const;
  void Account(const IterationMetrics& m);
  // After a step: an epoch that ended, an evaluation due, the run's end.
  absl::Status AfterStep();

  const LoopOptions options_;
  Exchanger* const exchanger_;
  float* const params_;
  RunLog* const log_;
  const RunHooks hooks_;
  const bool forward_waits_;
  std::unique_ptr<EmulatedStep> pacer_;  // only when emulating a slower machine

  bool started_ = false;
  bool over_ = false;
  bool ended_ = false;
  bool step_out_ = false;
  LoopResult result_;
  absl::Time start_;
  std::unique_ptr<Progress> progress_;
  Epoch epoch_;
  Out out_;
  std::optional<Due> due_;
  // The final epoch's evaluation, left for after the settle: that epoch (0-based), or -1.
  int final_evaluation_epoch_ = -1;
};

}  // namespace r2sp

#endif  // R2SP_WORKER_TRAINING_RUN_H_
