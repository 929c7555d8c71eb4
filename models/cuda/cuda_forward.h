// ForwardPass: queues each node's forward on the compute stream with cuDNN (convolution,
// pooling, activation, batch norm, add), cuBLAS (fully connected layers) and our dropout
// kernel, over a plan that BuildPlan (cuda_plan.h) made. One function per op. Built only with
// CUDA. Not part of the models API: include models/cuda/cuda_network.h.
#ifndef R2SP_MODELS_CUDA_CUDA_FORWARD_H_
#define R2SP_MODELS_CUDA_CUDA_FORWARD_H_

#include <cstdint>

#include "absl/status/status.h"
#include "models/cuda/cuda_plan.h"
#include "models/graph.h"

namespace r2sp::models::cuda_internal {

// Thread-compatible; used by the network's one thread.
class ForwardPass {
 public:
  // All borrowed from the CudaNetwork that owns this pass and outlives it; `handles` and
  // `params` are read when a node is queued, so they may be filled after construction.
  // Training passes update `running`; `seed` and `step` pick the dropout masks.
  ForwardPass(const Graph& graph, const CudaHandles& handles, const DeviceParams& params,
              const RunningStatistics& running, uint64_t seed, const int64_t& step);

  // Queues node i's forward (nothing for the input node). REQUIRES: the node's inputs are
  // queued, and its parameters are in (or queued before, on the stream) params.params.
  absl::Status Queue(PlanGpu& plan, int i, bool training);

 private:
  absl::Status ForwardConv(PlanGpu& plan, const NodeArgs& a);
  absl::Status ForwardLinear(PlanGpu& plan, const NodeArgs& a);
  absl::Status ForwardRelu(const NodeArgs& a);
  absl::Status ForwardPool(const NodeArgs& a);
  absl::Status ForwardBatchNorm(const NodeArgs& a, bool training);
  absl::Status ForwardDropout(const NodeArgs& a, bool training);
  absl::Status ForwardFlatten(const NodeArgs& a);
  absl::Status ForwardAdd(PlanGpu& plan, const NodeArgs& a);

  const Graph& graph_;
  const CudaHandles& h_;
  const DeviceParams& params_;
  const RunningStatistics& running_;  // the arrays' contents change, not the arrays
  const uint64_t seed_;
  const int64_t& step_;
};

}  // namespace r2sp::models::cuda_internal

#endif  // R2SP_MODELS_CUDA_CUDA_FORWARD_H_
