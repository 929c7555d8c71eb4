// ForwardPass (cuda_forward.h): each node's forward with cuDNN, cuBLAS and our kernels, one
// function per op; Queue only dispatches.
#include "models/cuda/cuda_forward.h"

#include "common/status_macros.h"
#include "models/cuda/cuda_kernels.h"
#include "models/cuda/cuda_status.h"

namespace r2sp::models::cuda_internal {
namespace {

// cuDNN's and cuBLAS's alpha and beta are read through pointers.
constexpr float kOne = 1.0f, kZero = 0.0f;

}  // namespace

ForwardPass::ForwardPass(const Graph& graph, const CudaHandles& handles, const DeviceParams& params,
                         const RunningStatistics& running, uint64_t seed, const int64_t& step)
    : graph_(graph), h_(handles), params_(params), running_(running), seed_(seed), step_(step) {}

absl::Status ForwardPass::Queue(PlanGpu& plan, int i, bool training) {
  const NodeArgs a = ArgsFor(graph_, plan, i);
  switch (a.node.op) {
    case Op::kConv:
      return ForwardConv(plan, a);
    case Op::kLinear:
      return ForwardLinear(plan, a);
    case Op::kRelu:
      return ForwardRelu(a);
    case Op::kMaxPool:
    case Op::kGlobalAvgPool:
      return ForwardPool(a);
    case Op::kBatchNorm:
      return ForwardBatchNorm(a, training);
    case Op::kDropout:
      return ForwardDropout(a, training);
    case Op::kFlatten:
      return ForwardFlatten(a);
    case Op::kAdd:
      return ForwardAdd(plan, a);
    case Op::kInput:
      break;
  }
  return absl::OkStatus();
}

absl::Status ForwardPass::ForwardConv(PlanGpu& plan, const NodeArgs& a) {
  const Node& node = a.node;
  NodeGpu& g = a.g;
  CUDNN_OK(cudnnConvolutionForward(
      h_.cudnn, &kOne, a.in.out_desc, a.x, g.filter, params_.Param(node.first_param), g.conv,
      g.fwd_algo, plan.workspace.ptr, plan.workspace_bytes, &kZero, g.out_desc, g.out.ptr));
  if (node.bias) {
    CUDNN_OK(cudnnAddTensor(h_.cudnn, &kOne, g.bias_desc, params_.Param(node.first_param + 1),
                            &kOne, g.out_desc, g.out.ptr));
  }
  return absl::OkStatus();
}

absl::Status ForwardPass::ForwardLinear(PlanGpu& plan, const NodeArgs& a) {
  const Node& node = a.node;
  const int in_features = static_cast<int>(graph_.nodes[a.in_index].out.size());
  const int out_features = node.out.c;
  // Row-major Y[n][o] = X[n][i] W[o][i]^T, i.e. column-major Y' = W'^T X'.
  CUBLAS_OK(cublasSgemm(h_.cublas, CUBLAS_OP_T, CUBLAS_OP_N, out_features, plan.batch, in_features,
                        &kOne, params_.Param(node.first_param), in_features, a.x, in_features,
                        &kZero, a.g.out.ptr, out_features));
  CUDNN_OK(cudnnAddTensor(h_.cudnn, &kOne, a.g.bias_desc, params_.Param(node.first_param + 1),
                          &kOne, a.g.out_desc, a.g.out.ptr));
  return absl::OkStatus();
}

absl::Status ForwardPass::ForwardRelu(const NodeArgs& a) {
  CUDNN_OK(cudnnActivationForward(h_.cudnn, h_.relu, &kOne, a.in.out_desc, a.x, &kZero,
                                  a.g.out_desc, a.g.out.ptr));
  return absl::OkStatus();
}

absl::Status ForwardPass::ForwardPool(const NodeArgs& a) {
  CUDNN_OK(cudnnPoolingForward(h_.cudnn, a.g.pool, &kOne, a.in.out_desc, a.x, &kZero, a.g.out_desc,
                               a.g.out.ptr));
  return absl::OkStatus();
}

absl::Status ForwardPass::ForwardBatchNorm(const NodeArgs& a, bool training) {
  const Node& node = a.node;
  NodeGpu& g = a.g;
  const int i = a.index;
  if (training) {
    CUDNN_OK(cudnnBatchNormalizationForwardTraining(
        h_.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, a.in.out_desc, a.x, g.out_desc, g.out.ptr,
        g.bn_desc, params_.Param(node.first_param), params_.Param(node.first_param + 1),
        kBatchNormMomentum, running_.mean[i].ptr, running_.var[i].ptr, kBatchNormEpsilon,
        g.saved_mean.ptr, g.saved_inv_var.ptr));
  } else {
    CUDNN_OK(cudnnBatchNormalizationForwardInference(
        h_.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, a.in.out_desc, a.x, g.out_desc, g.out.ptr,
        g.bn_desc, params_.Param(node.first_param), params_.Param(node.first_param + 1),
        running_.mean[i].ptr, running_.var[i].ptr, kBatchNormEpsilon));
  }
  return absl::OkStatus();
}

absl::Status ForwardPass::ForwardDropout(const NodeArgs& a, bool training) {
  NodeGpu& g = a.g;
  if (training && a.node.dropout > 0.0f) {
    CUDA_OK(cuda::DropoutForward(a.x, g.out.ptr, g.mask.ptr, g.out.count, seed_, step_, a.index,
                                 a.node.dropout, h_.stream));
  } else {
    CUDA_OK(cudaMemcpyAsync(g.out.ptr, a.x, g.out.count * sizeof(float), cudaMemcpyDeviceToDevice,
                            h_.stream));
  }
  return absl::OkStatus();
}

absl::Status ForwardPass::ForwardFlatten(const NodeArgs& a) {
  // NCHW is already C,H,W-ordered per sample.
  CUDA_OK(cudaMemcpyAsync(a.g.out.ptr, a.x, a.g.out.count * sizeof(float), cudaMemcpyDeviceToDevice,
                          h_.stream));
  return absl::OkStatus();
}

absl::Status ForwardPass::ForwardAdd(PlanGpu& plan, const NodeArgs& a) {
  const float* x2 = plan.nodes[a.node.inputs[1]].out.ptr;
  CUDNN_OK(cudnnOpTensor(h_.cudnn, h_.add_op, &kOne, a.in.out_desc, a.x, &kOne, a.in.out_desc, x2,
                         &kZero, a.g.out_desc, a.g.out.ptr));
  return absl::OkStatus();
}

}  // namespace r2sp::models::cuda_internal
