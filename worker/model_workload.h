// A real network trained on this worker's shard of a data set, as a Workload: batches from the
// Batcher (fixed ones per epoch, or wrapping ones of the size the scheduler tunes), the
// gradient from the backend (oneDNN or CUDA), and the test set evaluated after every epoch on
// the worker that evaluates.
#ifndef R2SP_WORKER_MODEL_WORKLOAD_H_
#define R2SP_WORKER_MODEL_WORKLOAD_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "models/data/batcher.h"
#include "models/data/dataset.h"
#include "models/host_array.h"
#include "models/network.h"
#include "worker/workload.h"

namespace r2sp {

struct ModelWorkloadOptions {
  int rank = 0;
  // Batches wrap around the shard instead of ending with the epoch (hetero batching: sizes
  // change, and an epoch is the data set in global batches).
  bool wrapping_batches = false;
  int largest_batch = 64;  // REQUIRES: >= 1; asked-for batches are clamped to [1, this]
  bool evaluate = false;   // evaluate the test set after every epoch
  int eval_batch = 1000;
};

// Borrowed pointers outlive the workload; `test` may be null when !evaluate.
class ModelWorkload : public Workload {
 public:
  ModelWorkload(const ModelWorkloadOptions& options, models::Network* net,
                models::Batcher* batcher, const models::Dataset* test);

  void StartEpoch(int epoch) override;
  void SkipSteps(int64_t steps, int batch) override;
  void set_gradient_ready(GradientReady fn) override;
  absl::StatusOr<ComputedStep> ComputeGradient(int64_t clock, int batch,
                                               const float* params) override;
  bool EvaluatesAfterEpoch() const override { return options_.evaluate && test_ != nullptr; }
  absl::StatusOr<TestEvaluation> EvaluateTest(const float* params) override;

 private:
  const ModelWorkloadOptions options_;
  models::Network* const net_;
  models::Batcher* const batcher_;
  const models::Dataset* const test_;
  std::vector<float> images_;
  std::vector<int32_t> labels_;
  models::HostArray grads_;  // page-aligned: pinned for GPU copies
  std::unique_ptr<models::PinnedHostMemory> grads_pin_;  // after grads_: unpinned first
};

}  // namespace r2sp

#endif  // R2SP_WORKER_MODEL_WORKLOAD_H_
