// See synthetic_trainer.h.
#include "worker/synthetic_trainer.h"

#include <memory>

#include "common/status_macros.h"
#include "worker/exchanger.h"
#include "worker/synthetic_workload.h"
#include "worker/training_loop.h"

namespace r2sp {

SyntheticTrainer::SyntheticTrainer(const WorkerOptions& options) : options_(options) {}

absl::StatusOr<std::vector<proto::TensorSpec>> SyntheticTrainer::Load() {
  R2SP_RETURN_IF_ERROR(options_.Validate());
  std::vector<proto::TensorSpec> tensors =
      SyntheticModel(static_cast<size_t>(options_.model_mb * 1024 * 1024 / 4), options_.layers);
  size_t size = 0;
  for (const proto::TensorSpec& t : tensors) size += t.num_elements();
  params_.assign(size, 0.0f);
  return tensors;
}

absl::Status SyntheticTrainer::InitialParameters() {
  if (options_.random_init) FillInitialParams(options_.seed, params_.data(), params_.size());
  return absl::OkStatus();
}

absl::StatusOr<LoopResult> SyntheticTrainer::Train(WorkerSession* session) {
  R2SP_ASSIGN_OR_RETURN(std::unique_ptr<RunLog> log, session->OpenLog());
  LoopOptions loop = session->RunOptions(/*settles=*/false, params_.data());
  // One epoch of --iterations steps.
  loop.epochs = 1;
  loop.max_steps = 0;
  loop.eval_every = 0;
  loop.steps_per_epoch = options_.iterations;
  loop.log_every = options_.log_every > 0 ? options_.log_every : 10;
  SyntheticOptions synthetic = options_.synthetic;
  synthetic.rank = session->rank();
  synthetic.seed = options_.seed;
  SyntheticWorkload workload(synthetic, params_.size());
  Exchanger exchanger(session->JobMode(), session->ps(), session->scheduler(), log.get());
  return RunTrainingLoop(loop, &workload, &exchanger, params_.data(), log.get());
}

}  // namespace r2sp
