// The C++ trainers' training loop: a Workload (a real network on its data, or the synthetic
// model: workload.h) driven through a TrainingRun (training_run.h) on the calling thread:
// the run's next step -> the workload's gradient (its backward's reports going to the run, so
// that --overlap pushes start during backward, and its forward waiting for each part of the
// parameters an overlapped pull still writes, where the workload can say) -> the run's exchange
// -> an evaluation when one is due.
#ifndef R2SP_WORKER_TRAINING_LOOP_H_
#define R2SP_WORKER_TRAINING_LOOP_H_

#include "absl/status/statusor.h"
#include "worker/exchanger.h"
#include "worker/loop_options.h"
#include "worker/run_log.h"
#include "worker/workload.h"

namespace r2sp {

// Trains `workload` epoch after epoch from options.first_step until options.epochs (or
// max_steps) are done, and returns what the run did; the first error (an epoch plan, the
// workload, the exchange, an evaluation) ends it. Borrows the workload, the exchanger, `params`
// (the model's size; holds the last pulled parameters once it returns) and `log` (may be null).
// The workload's callbacks are detached before it returns, error or not.
absl::StatusOr<LoopResult> RunTrainingLoop(const LoopOptions& options, Workload* workload,
                                           Exchanger* exchanger, float* params, RunLog* log);

}  // namespace r2sp

#endif  // R2SP_WORKER_TRAINING_LOOP_H_
