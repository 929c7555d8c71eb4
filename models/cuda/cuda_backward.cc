// BackwardPass (cuda_backward.h): each node's backward with cuDNN, cuBLAS and our kernels,
// one function per op; Queue only dispatches. Gradients of nodes with several consumers
// accumulate through cuDNN's and cuBLAS's beta = 1.
#include "models/cuda/cuda_backward.h"

#include "common/status_macros.h"
#include "models/cuda/cuda_kernels.h"
#include "models/cuda/cuda_status.h"

namespace r2sp::models::cuda_internal {
namespace {

// cuDNN's and cuBLAS's alpha and beta are read through pointers.
constexpr float kOne = 1.0f, kZero = 0.0f;

// Backward writes into input k's gradient: 0 initialises it (the first writer), 1 accumulates.
float BetaFor(const NodeGpu& g, int k) { return g.first_diff_write[k] ? 0.0f : 1.0f; }

}  // namespace

BackwardPass::BackwardPass(const Graph& graph, const CudaHandles& handles,
                           const DeviceParams& params)
    : graph_(graph), h_(handles), params_(params) {}

absl::Status BackwardPass::Queue(PlanGpu& plan, int i) {
  const NodeArgs a = ArgsFor(graph_, plan, i);
  switch (a.node.op) {
    case Op::kConv:
      return BackwardConv(plan, a);
    case Op::kLinear:
      return BackwardLinear(plan, a);
    case Op::kRelu:
      return BackwardRelu(a);
    case Op::kMaxPool:
    case Op::kGlobalAvgPool:
      return BackwardPool(a);
    case Op::kBatchNorm:
      return BackwardBatchNorm(a);
    case Op::kDropout:
      return BackwardDropout(a);
    case Op::kFlatten:
      return BackwardFlatten(a);
    case Op::kAdd:
      return BackwardAdd(plan, a);
    case Op::kInput:
      break;
  }
  return absl::OkStatus();
}

absl::Status BackwardPass::BackwardConv(PlanGpu& plan, const NodeArgs& a) {
  const Node& node = a.node;
  NodeGpu& g = a.g;
  CUDNN_OK(cudnnConvolutionBackwardFilter(
      h_.cudnn, &kOne, a.in.out_desc, a.x, g.out_desc, g.diff.ptr, g.conv, g.bwd_filter_algo,
      plan.workspace.ptr, plan.workspace_bytes, &kZero, g.filter, params_.Grad(node.first_param)));
  if (node.bias) {
    CUDNN_OK(cudnnConvolutionBackwardBias(h_.cudnn, &kOne, g.out_desc, g.diff.ptr, &kZero,
                                          g.bias_desc, params_.Grad(node.first_param + 1)));
  }
  if (!a.need_dx()) return absl::OkStatus();
  const float beta = BetaFor(g, 0);
  CUDNN_OK(cudnnConvolutionBackwardData(h_.cudnn, &kOne, g.filter, params_.Param(node.first_param),
                                        g.out_desc, g.diff.ptr, g.conv, g.bwd_data_algo,
                                        plan.workspace.ptr, plan.workspace_bytes, &beta,
                                        a.in.out_desc, a.in.diff.ptr));
  return absl::OkStatus();
}

absl::Status BackwardPass::BackwardLinear(PlanGpu& plan, const NodeArgs& a) {
  const Node& node = a.node;
  NodeGpu& g = a.g;
  const int n = plan.batch;
  const int in_features = static_cast<int>(graph_.nodes[a.in_index].out.size());
  const int out_features = node.out.c;
  // dW[o][i] = sum_n dY[n][o] X[n][i]; column-major dW' (i x o) = X' dY'^T.
  CUBLAS_OK(cublasSgemm(h_.cublas, CUBLAS_OP_N, CUBLAS_OP_T, in_features, out_features, n, &kOne,
                        a.x, in_features, g.diff.ptr, out_features, &kZero,
                        params_.Grad(node.first_param), in_features));
  CUDNN_OK(cudnnConvolutionBackwardBias(h_.cudnn, &kOne, g.out_desc, g.diff.ptr, &kZero,
                                        g.bias_desc, params_.Grad(node.first_param + 1)));
  if (!a.need_dx()) return absl::OkStatus();
  const float beta = BetaFor(g, 0);
  // dX[n][i] = dY[n][o] W[o][i]; column-major dX' (i x n) = W' dY'.
  CUBLAS_OK(cublasSgemm(h_.cublas, CUBLAS_OP_N, CUBLAS_OP_N, in_features, n, out_features, &kOne,
                        params_.Param(node.first_param), in_features, g.diff.ptr, out_features,
                        &beta, a.in.diff.ptr, in_features));
  return absl::OkStatus();
}

absl::Status BackwardPass::BackwardRelu(const NodeArgs& a) {
  if (!a.need_dx()) return absl::OkStatus();
  const float beta = BetaFor(a.g, 0);
  CUDNN_OK(cudnnActivationBackward(h_.cudnn, h_.relu, &kOne, a.g.out_desc, a.g.out.ptr,
                                   a.g.out_desc, a.g.diff.ptr, a.in.out_desc, a.x, &beta,
                                   a.in.out_desc, a.in.diff.ptr));
  return absl::OkStatus();
}

absl::Status BackwardPass::BackwardPool(const NodeArgs& a) {
  if (!a.need_dx()) return absl::OkStatus();
  const float beta = BetaFor(a.g, 0);
  CUDNN_OK(cudnnPoolingBackward(h_.cudnn, a.g.pool, &kOne, a.g.out_desc, a.g.out.ptr, a.g.out_desc,
                                a.g.diff.ptr, a.in.out_desc, a.x, &beta, a.in.out_desc,
                                a.in.diff.ptr));
  return absl::OkStatus();
}

absl::Status BackwardPass::BackwardBatchNorm(const NodeArgs& a) {
  const Node& node = a.node;
  NodeGpu& g = a.g;
  // cuDNN always computes dx; without an input gradient it goes to this node's own output
  // buffer, which no later backward step reads (its consumers ran before it).
  const float beta = BetaFor(g, 0);
  float* dx = a.need_dx() ? a.in.diff.ptr : g.out.ptr;
  const float* bn_beta = a.need_dx() ? &beta : &kZero;
  CUDNN_OK(cudnnBatchNormalizationBackward(
      h_.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, bn_beta, &kOne, &kZero, a.in.out_desc, a.x,
      g.out_desc, g.diff.ptr, a.in.out_desc, dx, g.bn_desc, params_.Param(node.first_param),
      params_.Grad(node.first_param), params_.Grad(node.first_param + 1), kBatchNormEpsilon,
      g.saved_mean.ptr, g.saved_inv_var.ptr));
  return absl::OkStatus();
}

absl::Status BackwardPass::BackwardDropout(const NodeArgs& a) {
  if (!a.need_dx()) return absl::OkStatus();
  NodeGpu& g = a.g;
  const float beta = BetaFor(g, 0);
  if (a.node.dropout > 0.0f) {
    CUDA_OK(cuda::MultiplyAccumulate(g.diff.ptr, g.mask.ptr, a.in.diff.ptr, g.diff.count, beta,
                                     h_.stream));
  } else {
    CUDNN_OK(cudnnAddTensor(h_.cudnn, &kOne, g.out_desc, g.diff.ptr, &beta, a.in.out_desc,
                            a.in.diff.ptr));
  }
  return absl::OkStatus();
}

absl::Status BackwardPass::BackwardFlatten(const NodeArgs& a) {
  if (!a.need_dx()) return absl::OkStatus();
  const float beta = BetaFor(a.g, 0);
  // The same bytes, seen with the input's shape.
  CUDNN_OK(cudnnAddTensor(h_.cudnn, &kOne, a.in.out_desc, a.g.diff.ptr, &beta, a.in.out_desc,
                          a.in.diff.ptr));
  return absl::OkStatus();
}

absl::Status BackwardPass::BackwardAdd(PlanGpu& plan, const NodeArgs& a) {
  for (size_t k = 0; k < a.node.inputs.size(); ++k) {
    if (a.node.inputs[k] == 0) continue;
    NodeGpu& target = plan.nodes[a.node.inputs[k]];
    const float beta = BetaFor(a.g, static_cast<int>(k));
    CUDNN_OK(cudnnAddTensor(h_.cudnn, &kOne, a.g.out_desc, a.g.diff.ptr, &beta, target.out_desc,
                            target.diff.ptr));
  }
  return absl::OkStatus();
}

}  // namespace r2sp::models::cuda_internal
