// The C++ worker's trainer of a real network (--model=mlp, cnn or resnet20) on its shard of a
// data set: loads the data and builds the model (models/), gives rank 0's initial parameters
// (--init: random from --seed, zero, or a model file), and trains it through the job
// (training_loop.h over a ModelWorkload, with the scheduler's epoch plans when survivors take
// over dead workers' data).
#ifndef R2SP_WORKER_MODEL_TRAINER_H_
#define R2SP_WORKER_MODEL_TRAINER_H_

#include <optional>
#include <vector>

#include "models/data/dataset.h"
#include "models/graph.h"
#include "common/host_array.h"
#include "worker/trainer.h"
#include "worker/worker_options.h"

namespace r2sp {

class ModelTrainer : public LoopTrainer {
 public:
  // With a real model; Load returns options.Validate()'s error first.
  explicit ModelTrainer(const WorkerOptions& options);

  absl::StatusOr<std::vector<proto::TensorSpec>> Load() override;
  bool wants_data_shard() const override { return true; }
  float* params() override { return params_.data(); }
  absl::Status InitialParameters() override;
  absl::StatusOr<LoopResult> Train(WorkerSession* session) override;

 private:
  const WorkerOptions options_;
  std::optional<models::TrainTest> data_;
  std::optional<models::Graph> graph_;
  HostArray params_;  // page-aligned: pinned for GPU copies
};

}  // namespace r2sp

#endif  // R2SP_WORKER_MODEL_TRAINER_H_
