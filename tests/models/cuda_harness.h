// Test-only: the CUDA backend's plan and passes without CudaNetwork — library handles, device
// parameters and gradients, one plan — so that BuildPlan, ForwardPass and BackwardPass can be
// tested one at a time on hand-sized graphs. Needs a GPU (callers skip without one).
#ifndef R2SP_TESTS_MODELS_CUDA_HARNESS_H_
#define R2SP_TESTS_MODELS_CUDA_HARNESS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "models/cuda/cuda_backward.h"
#include "models/cuda/cuda_forward.h"
#include "models/cuda/cuda_plan.h"
#include "models/graph.h"

namespace r2sp::models::cuda_internal::testing {

// Whether a CUDA device is visible (clears the sticky error when not).
bool HaveGpu();

class CudaHarness {
 public:
  explicit CudaHarness(Graph graph, uint64_t seed = 1);
  ~CudaHarness();

  // Creates the handles, uploads `params` (zeroes the gradients) and builds a plan of `batch`
  // (full-fp32 algorithms).
  absl::Status Init(const std::vector<float>& params, int batch);
  // Uploads `images` and queues every node's forward.
  absl::Status Forward(const std::vector<float>& images, bool training);
  // Sets d(loss)/d(logits) to `logits_diff` and queues every node's backward, last first.
  absl::Status Backward(const std::vector<float>& logits_diff);
  // Waits for the stream, then copies `count` floats from the device.
  absl::StatusOr<std::vector<float>> Read(const float* device, size_t count);

  const Graph& graph() const { return graph_; }
  PlanGpu& plan() { return plan_; }
  DeviceParams& device() { return device_; }
  RunningStatistics& running() { return running_; }
  void set_step(int64_t step) { step_ = step; }

 private:
  const Graph graph_;
  CudaHandles h_;
  DeviceParams device_;
  RunningStatistics running_;
  int64_t step_ = 0;
  ForwardPass forward_;
  BackwardPass backward_;
  PlanGpu plan_;
};

}  // namespace r2sp::models::cuda_internal::testing

#endif  // R2SP_TESTS_MODELS_CUDA_HARNESS_H_
