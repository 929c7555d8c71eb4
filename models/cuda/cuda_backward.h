// BackwardPass: queues each node's backward on the compute stream with cuDNN, cuBLAS and our
// kernels, over a plan that BuildPlan (cuda_plan.h) made; the parameters' gradients go to the
// device gradient array, each input's gradient is initialised by its first writer in backward
// order and accumulated (beta = 1) by later ones. One function per op. Built only with CUDA.
// Not part of the models API: include models/cuda/cuda_network.h.
#ifndef R2SP_MODELS_CUDA_CUDA_BACKWARD_H_
#define R2SP_MODELS_CUDA_CUDA_BACKWARD_H_

#include "absl/status/status.h"
#include "models/cuda/cuda_plan.h"
#include "models/graph.h"

namespace r2sp::models::cuda_internal {

// Thread-compatible; used by the network's one thread.
class BackwardPass {
 public:
  // All borrowed from the CudaNetwork that owns this pass and outlives it; `handles` and
  // `params` are read when a node is queued, so they may be filled after construction.
  BackwardPass(const Graph& graph, const CudaHandles& handles, const DeviceParams& params);

  // Queues node i's backward (nothing for the input node). REQUIRES: a forward queued on the
  // same plan, and the backward of every node after i, from the last down (the loss writes the
  // last node's gradient).
  absl::Status Queue(PlanGpu& plan, int i);

 private:
  absl::Status BackwardConv(PlanGpu& plan, const NodeArgs& a);
  absl::Status BackwardLinear(PlanGpu& plan, const NodeArgs& a);
  absl::Status BackwardRelu(const NodeArgs& a);
  absl::Status BackwardPool(const NodeArgs& a);
  absl::Status BackwardBatchNorm(const NodeArgs& a);
  absl::Status BackwardDropout(const NodeArgs& a);
  absl::Status BackwardFlatten(const NodeArgs& a);
  absl::Status BackwardAdd(PlanGpu& plan, const NodeArgs& a);

  const Graph& graph_;
  const CudaHandles& h_;
  const DeviceParams& params_;
};

}  // namespace r2sp::models::cuda_internal

#endif  // R2SP_MODELS_CUDA_CUDA_BACKWARD_H_
