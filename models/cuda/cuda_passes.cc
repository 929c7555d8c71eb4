// The CUDA backend (models/cuda/cuda_network.cc): the forward pass and the backward pass over
// a plan, one function per op with cuDNN, cuBLAS and our kernels; the passes only dispatch.
#include "models/cuda/cuda_network_internal.h"

namespace r2sp::models::cuda_internal {
namespace {

// cuDNN's and cuBLAS's alpha and beta are read through pointers.
constexpr float kOne = 1.0f, kZero = 0.0f;

// Backward writes into input k's gradient: 0 initialises it (the first writer), 1 accumulates.
float BetaFor(const NodeGpu& g, int k) { return g.first_diff_write[k] ? 0.0f : 1.0f; }

}  // namespace

CudaNetwork::NodeArgs CudaNetwork::ArgsFor(PlanGpu& plan, int i) {
  const Node& node = graph_.nodes[i];
  const int in_index = node.inputs[0];
  NodeGpu& in = plan.nodes[in_index];
  return NodeArgs{i, node, plan.nodes[i], in_index, in,
                  in_index == 0 ? plan.images.ptr : in.out.ptr};
}

absl::Status CudaNetwork::Forward(PlanGpu& plan, bool training, CopyPipeline* copies) {
  for (int i = 1; i < static_cast<int>(graph_.nodes.size()); ++i) {
    if (copies != nullptr) R2SP_RETURN_IF_ERROR(copies->WaitForParams(i, stream_));
    R2SP_RETURN_IF_ERROR(ForwardNode(plan, ArgsFor(plan, i), training));
  }
  return absl::OkStatus();
}

absl::Status CudaNetwork::ForwardNode(PlanGpu& plan, const NodeArgs& a, bool training) {
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

absl::Status CudaNetwork::ForwardConv(PlanGpu& plan, const NodeArgs& a) {
  const Node& node = a.node;
  NodeGpu& g = a.g;
  CUDNN_OK(cudnnConvolutionForward(cudnn_, &kOne, a.in.out_desc, a.x, g.filter,
                                   ParamPtr(node.first_param), g.conv, g.fwd_algo,
                                   plan.workspace.ptr, plan.workspace_bytes, &kZero, g.out_desc,
                                   g.out.ptr));
  if (node.bias) {
    CUDNN_OK(cudnnAddTensor(cudnn_, &kOne, g.bias_desc, ParamPtr(node.first_param + 1), &kOne,
                            g.out_desc, g.out.ptr));
  }
  return absl::OkStatus();
}

absl::Status CudaNetwork::ForwardLinear(PlanGpu& plan, const NodeArgs& a) {
  const Node& node = a.node;
  const int in_features = static_cast<int>(graph_.nodes[a.in_index].out.size());
  const int out_features = node.out.c;
  // Row-major Y[n][o] = X[n][i] W[o][i]^T, i.e. column-major Y' = W'^T X'.
  CUBLAS_OK(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, out_features, plan.batch, in_features,
                        &kOne, ParamPtr(node.first_param), in_features, a.x, in_features, &kZero,
                        a.g.out.ptr, out_features));
  CUDNN_OK(cudnnAddTensor(cudnn_, &kOne, a.g.bias_desc, ParamPtr(node.first_param + 1), &kOne,
                          a.g.out_desc, a.g.out.ptr));
  return absl::OkStatus();
}

absl::Status CudaNetwork::ForwardRelu(const NodeArgs& a) {
  CUDNN_OK(cudnnActivationForward(cudnn_, relu_, &kOne, a.in.out_desc, a.x, &kZero, a.g.out_desc,
                                  a.g.out.ptr));
  return absl::OkStatus();
}

absl::Status CudaNetwork::ForwardPool(const NodeArgs& a) {
  CUDNN_OK(cudnnPoolingForward(cudnn_, a.g.pool, &kOne, a.in.out_desc, a.x, &kZero, a.g.out_desc,
                               a.g.out.ptr));
  return absl::OkStatus();
}

absl::Status CudaNetwork::ForwardBatchNorm(const NodeArgs& a, bool training) {
  const Node& node = a.node;
  NodeGpu& g = a.g;
  const int i = a.index;
  if (training) {
    CUDNN_OK(cudnnBatchNormalizationForwardTraining(
        cudnn_, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, a.in.out_desc, a.x, g.out_desc, g.out.ptr,
        g.bn_desc, ParamPtr(node.first_param), ParamPtr(node.first_param + 1),
        kBatchNormMomentum, running_mean_[i].ptr, running_var_[i].ptr, kBatchNormEpsilon,
        g.saved_mean.ptr, g.saved_inv_var.ptr));
  } else {
    CUDNN_OK(cudnnBatchNormalizationForwardInference(
        cudnn_, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, a.in.out_desc, a.x, g.out_desc, g.out.ptr,
        g.bn_desc, ParamPtr(node.first_param), ParamPtr(node.first_param + 1),
        running_mean_[i].ptr, running_var_[i].ptr, kBatchNormEpsilon));
  }
  return absl::OkStatus();
}

absl::Status CudaNetwork::ForwardDropout(const NodeArgs& a, bool training) {
  NodeGpu& g = a.g;
  if (training && a.node.dropout > 0.0f) {
    CUDA_OK(cuda::DropoutForward(a.x, g.out.ptr, g.mask.ptr, g.out.count, options_.seed, step_,
                                 a.index, a.node.dropout, stream_));
  } else {
    CUDA_OK(cudaMemcpyAsync(g.out.ptr, a.x, g.out.count * sizeof(float),
                            cudaMemcpyDeviceToDevice, stream_));
  }
  return absl::OkStatus();
}

absl::Status CudaNetwork::ForwardFlatten(const NodeArgs& a) {
  // NCHW is already C,H,W-ordered per sample.
  CUDA_OK(cudaMemcpyAsync(a.g.out.ptr, a.x, a.g.out.count * sizeof(float),
                          cudaMemcpyDeviceToDevice, stream_));
  return absl::OkStatus();
}

absl::Status CudaNetwork::ForwardAdd(PlanGpu& plan, const NodeArgs& a) {
  const float* x2 = plan.nodes[a.node.inputs[1]].out.ptr;
  CUDNN_OK(cudnnOpTensor(cudnn_, add_op_, &kOne, a.in.out_desc, a.x, &kOne, a.in.out_desc, x2,
                         &kZero, a.g.out_desc, a.g.out.ptr));
  return absl::OkStatus();
}

absl::Status CudaNetwork::Backward(PlanGpu& plan, float* host_grads) {
  if (fp16_grads_ != nullptr && half_grads_.ptr == nullptr) {
    R2SP_RETURN_IF_ERROR(half_grads_.Allocate(grads_.count));
  }
  const CopyPipeline::HalfGradients half{half_grads_.ptr, fp16_grads_};
  const CopyPipeline::HalfGradients* to_half = fp16_grads_ != nullptr ? &half : nullptr;
  for (int i = static_cast<int>(graph_.nodes.size()) - 1; i > 0; --i) {
    R2SP_RETURN_IF_ERROR(BackwardNode(plan, ArgsFor(plan, i)));
    R2SP_RETURN_IF_ERROR(copies_.CopyGradients(i, stream_, grads_.ptr, host_grads, to_half));
  }
  return absl::OkStatus();
}

absl::Status CudaNetwork::BackwardNode(PlanGpu& plan, const NodeArgs& a) {
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

absl::Status CudaNetwork::BackwardConv(PlanGpu& plan, const NodeArgs& a) {
  const Node& node = a.node;
  NodeGpu& g = a.g;
  CUDNN_OK(cudnnConvolutionBackwardFilter(cudnn_, &kOne, a.in.out_desc, a.x, g.out_desc,
                                          g.diff.ptr, g.conv, g.bwd_filter_algo,
                                          plan.workspace.ptr, plan.workspace_bytes, &kZero,
                                          g.filter, GradPtr(node.first_param)));
  if (node.bias) {
    CUDNN_OK(cudnnConvolutionBackwardBias(cudnn_, &kOne, g.out_desc, g.diff.ptr, &kZero,
                                          g.bias_desc, GradPtr(node.first_param + 1)));
  }
  if (!a.need_dx()) return absl::OkStatus();
  const float beta = BetaFor(g, 0);
  CUDNN_OK(cudnnConvolutionBackwardData(cudnn_, &kOne, g.filter, ParamPtr(node.first_param),
                                        g.out_desc, g.diff.ptr, g.conv, g.bwd_data_algo,
                                        plan.workspace.ptr, plan.workspace_bytes, &beta,
                                        a.in.out_desc, a.in.diff.ptr));
  return absl::OkStatus();
}

absl::Status CudaNetwork::BackwardLinear(PlanGpu& plan, const NodeArgs& a) {
  const Node& node = a.node;
  NodeGpu& g = a.g;
  const int n = plan.batch;
  const int in_features = static_cast<int>(graph_.nodes[a.in_index].out.size());
  const int out_features = node.out.c;
  // dW[o][i] = sum_n dY[n][o] X[n][i]; column-major dW' (i x o) = X' dY'^T.
  CUBLAS_OK(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_T, in_features, out_features, n, &kOne,
                        a.x, in_features, g.diff.ptr, out_features, &kZero,
                        GradPtr(node.first_param), in_features));
  CUDNN_OK(cudnnConvolutionBackwardBias(cudnn_, &kOne, g.out_desc, g.diff.ptr, &kZero,
                                        g.bias_desc, GradPtr(node.first_param + 1)));
  if (!a.need_dx()) return absl::OkStatus();
  const float beta = BetaFor(g, 0);
  // dX[n][i] = dY[n][o] W[o][i]; column-major dX' (i x n) = W' dY'.
  CUBLAS_OK(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, in_features, n, out_features, &kOne,
                        ParamPtr(node.first_param), in_features, g.diff.ptr, out_features, &beta,
                        a.in.diff.ptr, in_features));
  return absl::OkStatus();
}

absl::Status CudaNetwork::BackwardRelu(const NodeArgs& a) {
  if (!a.need_dx()) return absl::OkStatus();
  const float beta = BetaFor(a.g, 0);
  CUDNN_OK(cudnnActivationBackward(cudnn_, relu_, &kOne, a.g.out_desc, a.g.out.ptr, a.g.out_desc,
                                   a.g.diff.ptr, a.in.out_desc, a.x, &beta, a.in.out_desc,
                                   a.in.diff.ptr));
  return absl::OkStatus();
}

absl::Status CudaNetwork::BackwardPool(const NodeArgs& a) {
  if (!a.need_dx()) return absl::OkStatus();
  const float beta = BetaFor(a.g, 0);
  CUDNN_OK(cudnnPoolingBackward(cudnn_, a.g.pool, &kOne, a.g.out_desc, a.g.out.ptr, a.g.out_desc,
                                a.g.diff.ptr, a.in.out_desc, a.x, &beta, a.in.out_desc,
                                a.in.diff.ptr));
  return absl::OkStatus();
}

absl::Status CudaNetwork::BackwardBatchNorm(const NodeArgs& a) {
  const Node& node = a.node;
  NodeGpu& g = a.g;
  // cuDNN always computes dx; without an input gradient it goes to this node's own output
  // buffer, which no later backward step reads (its consumers ran before it).
  const float beta = BetaFor(g, 0);
  float* dx = a.need_dx() ? a.in.diff.ptr : g.out.ptr;
  const float* bn_beta = a.need_dx() ? &beta : &kZero;
  CUDNN_OK(cudnnBatchNormalizationBackward(
      cudnn_, CUDNN_BATCHNORM_SPATIAL, &kOne, bn_beta, &kOne, &kZero, a.in.out_desc, a.x,
      g.out_desc, g.diff.ptr, a.in.out_desc, dx, g.bn_desc, ParamPtr(node.first_param),
      GradPtr(node.first_param), GradPtr(node.first_param + 1), kBatchNormEpsilon,
      g.saved_mean.ptr, g.saved_inv_var.ptr));
  return absl::OkStatus();
}

absl::Status CudaNetwork::BackwardDropout(const NodeArgs& a) {
  if (!a.need_dx()) return absl::OkStatus();
  NodeGpu& g = a.g;
  const float beta = BetaFor(g, 0);
  if (a.node.dropout > 0.0f) {
    CUDA_OK(cuda::MultiplyAccumulate(g.diff.ptr, g.mask.ptr, a.in.diff.ptr, g.diff.count, beta,
                                     stream_));
  } else {
    CUDNN_OK(cudnnAddTensor(cudnn_, &kOne, g.out_desc, g.diff.ptr, &beta, a.in.out_desc,
                            a.in.diff.ptr));
  }
  return absl::OkStatus();
}

absl::Status CudaNetwork::BackwardFlatten(const NodeArgs& a) {
  if (!a.need_dx()) return absl::OkStatus();
  const float beta = BetaFor(a.g, 0);
  // The same bytes, seen with the input's shape.
  CUDNN_OK(cudnnAddTensor(cudnn_, &kOne, a.in.out_desc, a.g.diff.ptr, &beta, a.in.out_desc,
                          a.in.diff.ptr));
  return absl::OkStatus();
}

absl::Status CudaNetwork::BackwardAdd(PlanGpu& plan, const NodeArgs& a) {
  for (size_t k = 0; k < a.node.inputs.size(); ++k) {
    if (a.node.inputs[k] == 0) continue;
    NodeGpu& target = plan.nodes[a.node.inputs[k]];
    const float beta = BetaFor(a.g, static_cast<int>(k));
    CUDNN_OK(cudnnAddTensor(cudnn_, &kOne, a.g.out_desc, a.g.diff.ptr, &beta, target.out_desc,
                            target.diff.ptr));
  }
  return absl::OkStatus();
}

}  // namespace r2sp::models::cuda_internal
