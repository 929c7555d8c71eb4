// See training_loop.h.
#include "worker/training_loop.h"

#include <memory>
#include <optional>

#include "absl/cleanup/cleanup.h"
#include "common/status_macros.h"
#include "worker/training_run.h"

namespace r2sp {

absl::StatusOr<LoopResult> RunTrainingLoop(const LoopOptions& options, Workload* workload,
                                           Exchanger* exchanger, float* params, RunLog* log) {
  RunHooks hooks;
  hooks.start_epoch = [workload](int epoch, int64_t steps, int64_t skip, int batch) {
    workload->StartEpoch(epoch, steps);
    if (skip > 0) workload->SkipSteps(skip, batch);
  };
  hooks.evaluates = [workload] { return workload->EvaluatesAfterEpoch(); };
  std::unique_ptr<TrainingRun> run;
  const bool reports = exchanger->overlaps_backward();
  if (reports) {
    workload->set_gradient_ready([&run](HostGradient grads, int64_t offset, int64_t count) {
      run->GradientReady(grads, offset, count);
    });
  }
  const bool forward_waits =
      exchanger->overlaps_pulls() &&
      workload->set_params_needed(
          [&run](int64_t offset, int64_t count) { run->ParamsNeeded(offset, count); });
  // The workload must not call into the run once it is gone, error or not.
  absl::Cleanup detach = [&] {
    if (reports) workload->set_gradient_ready(nullptr);
    if (forward_waits) workload->set_params_needed(nullptr);
  };
  run = std::make_unique<TrainingRun>(options, exchanger, params, log, std::move(hooks),
                                      forward_waits);
  while (true) {
    R2SP_ASSIGN_OR_RETURN(const std::optional<RunStep> step, run->Next());
    if (!step.has_value()) break;
    R2SP_ASSIGN_OR_RETURN(const ComputedStep computed,
                          workload->ComputeGradient(step->clock, step->batch, params));
    R2SP_RETURN_IF_ERROR(run->Complete(computed));
    if (!run->evaluation_due()) continue;
    R2SP_ASSIGN_OR_RETURN(const float* evaluated_params, run->EvaluationParams());
    R2SP_ASSIGN_OR_RETURN(const std::optional<TestEvaluation> evaluation,
                          workload->EvaluateTest(evaluated_params));
    run->Evaluated(evaluation);
  }
  return run->Finish();
}

}  // namespace r2sp
