// The C++ worker's synthetic trainer (--model=synthetic), for transport tests and benchmarks:
// the synthetic model of --model_mb in --layers (synthetic_workload.h), random (from --seed) or
// zero initial parameters, one epoch of --iterations steps, no data and no evaluation.
#ifndef R2SP_WORKER_SYNTHETIC_TRAINER_H_
#define R2SP_WORKER_SYNTHETIC_TRAINER_H_

#include <vector>

#include "worker/trainer.h"
#include "worker/worker_options.h"

namespace r2sp {

class SyntheticTrainer : public LoopTrainer {
 public:
  // With the synthetic model; Load returns options.Validate()'s error first.
  explicit SyntheticTrainer(const WorkerOptions& options);

  absl::StatusOr<std::vector<proto::TensorSpec>> Load() override;
  bool wants_data_shard() const override { return false; }
  float* params() override { return params_.data(); }
  absl::Status InitialParameters() override;
  absl::StatusOr<LoopResult> Train(WorkerSession* session) override;

 private:
  const WorkerOptions options_;
  std::vector<float> params_;
};

}  // namespace r2sp

#endif  // R2SP_WORKER_SYNTHETIC_TRAINER_H_
