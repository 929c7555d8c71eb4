// The CUDA backend (models/cuda/cuda_network.cc): the forward pass and the backward pass over
// a plan, node by node, with cuDNN, cuBLAS and our kernels.
#include "models/cuda/cuda_network_internal.h"

namespace r2sp::models::cuda_internal {

absl::Status CudaNetwork::Forward(PlanGpu& plan, bool training) {
  const float one = 1.0f, zero = 0.0f;
  const int n = plan.batch;
  for (size_t i = 1; i < graph_.nodes.size(); ++i) {
    const Node& node = graph_.nodes[i];
    NodeGpu& g = plan.nodes[i];
    const int in_index = node.inputs[0];
    NodeGpu& in = plan.nodes[in_index];
    const float* x = in_index == 0 ? plan.images.ptr : in.out.ptr;
    switch (node.op) {
      case Op::kConv:
        CUDNN_OK(cudnnConvolutionForward(cudnn_, &one, in.out_desc, x, g.filter, ParamPtr(node.first_param),
                                         g.conv, g.fwd_algo, plan.workspace.ptr, plan.workspace_bytes,
                                         &zero, g.out_desc, g.out.ptr));
        if (node.bias) {
          CUDNN_OK(cudnnAddTensor(cudnn_, &one, g.bias_desc, ParamPtr(node.first_param + 1), &one,
                                  g.out_desc, g.out.ptr));
        }
        break;
      case Op::kLinear: {
        const int in_features = static_cast<int>(graph_.nodes[in_index].out.size());
        const int out_features = node.out.c;
        // Row-major Y[n][o] = X[n][i] W[o][i]^T, i.e. column-major Y' = W'^T X'.
        CUBLAS_OK(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, out_features, n, in_features, &one,
                              ParamPtr(node.first_param), in_features, x, in_features, &zero,
                              g.out.ptr, out_features));
        CUDNN_OK(cudnnAddTensor(cudnn_, &one, g.bias_desc, ParamPtr(node.first_param + 1), &one,
                                g.out_desc, g.out.ptr));
        break;
      }
      case Op::kRelu:
        CUDNN_OK(cudnnActivationForward(cudnn_, relu_, &one, in.out_desc, x, &zero, g.out_desc,
                                        g.out.ptr));
        break;
      case Op::kMaxPool:
      case Op::kGlobalAvgPool:
        CUDNN_OK(cudnnPoolingForward(cudnn_, g.pool, &one, in.out_desc, x, &zero, g.out_desc,
                                     g.out.ptr));
        break;
      case Op::kBatchNorm:
        if (training) {
          CUDNN_OK(cudnnBatchNormalizationForwardTraining(
              cudnn_, CUDNN_BATCHNORM_SPATIAL, &one, &zero, in.out_desc, x, g.out_desc, g.out.ptr,
              g.bn_desc, ParamPtr(node.first_param), ParamPtr(node.first_param + 1),
              kBatchNormMomentum, running_mean_[i].ptr, running_var_[i].ptr, kBatchNormEpsilon,
              g.saved_mean.ptr, g.saved_inv_var.ptr));
        } else {
          CUDNN_OK(cudnnBatchNormalizationForwardInference(
              cudnn_, CUDNN_BATCHNORM_SPATIAL, &one, &zero, in.out_desc, x, g.out_desc, g.out.ptr,
              g.bn_desc, ParamPtr(node.first_param), ParamPtr(node.first_param + 1),
              running_mean_[i].ptr, running_var_[i].ptr, kBatchNormEpsilon));
        }
        break;
      case Op::kDropout:
        if (training && node.dropout > 0.0f) {
          CUDA_OK(cuda::DropoutForward(x, g.out.ptr, g.mask.ptr, g.out.count, options_.seed, step_,
                                       static_cast<int>(i), node.dropout, stream_));
        } else {
          CUDA_OK(cudaMemcpyAsync(g.out.ptr, x, g.out.count * sizeof(float),
                                  cudaMemcpyDeviceToDevice, stream_));
        }
        break;
      case Op::kFlatten:  // NCHW is already C,H,W-ordered per sample
        CUDA_OK(cudaMemcpyAsync(g.out.ptr, x, g.out.count * sizeof(float), cudaMemcpyDeviceToDevice,
                                stream_));
        break;
      case Op::kAdd: {
        const float* x2 = plan.nodes[node.inputs[1]].out.ptr;
        CUDNN_OK(cudnnOpTensor(cudnn_, add_op_, &one, in.out_desc, x, &one, in.out_desc, x2, &zero,
                               g.out_desc, g.out.ptr));
        break;
      }
      case Op::kInput:
        break;
    }
  }
  (void)n;
  return absl::OkStatus();
}

absl::Status CudaNetwork::Backward(PlanGpu& plan) {
  const float one = 1.0f, zero = 0.0f;
  const int n = plan.batch;
  for (int i = static_cast<int>(graph_.nodes.size()) - 1; i > 0; --i) {
    const Node& node = graph_.nodes[i];
    NodeGpu& g = plan.nodes[i];
    const int in_index = node.inputs[0];
    NodeGpu& in = plan.nodes[in_index];
    const float* x = in_index == 0 ? plan.images.ptr : in.out.ptr;
    const bool need_dx = in_index > 0;
    const float beta = g.first_diff_write[0] ? 0.0f : 1.0f;
    switch (node.op) {
      case Op::kConv:
        CUDNN_OK(cudnnConvolutionBackwardFilter(cudnn_, &one, in.out_desc, x, g.out_desc, g.diff.ptr,
                                                g.conv, g.bwd_filter_algo, plan.workspace.ptr,
                                                plan.workspace_bytes, &zero, g.filter,
                                                GradPtr(node.first_param)));
        if (node.bias) {
          CUDNN_OK(cudnnConvolutionBackwardBias(cudnn_, &one, g.out_desc, g.diff.ptr, &zero,
                                                g.bias_desc, GradPtr(node.first_param + 1)));
        }
        if (need_dx) {
          CUDNN_OK(cudnnConvolutionBackwardData(cudnn_, &one, g.filter, ParamPtr(node.first_param),
                                                g.out_desc, g.diff.ptr, g.conv, g.bwd_data_algo,
                                                plan.workspace.ptr, plan.workspace_bytes, &beta,
                                                in.out_desc, in.diff.ptr));
        }
        break;
      case Op::kLinear: {
        const int in_features = static_cast<int>(graph_.nodes[in_index].out.size());
        const int out_features = node.out.c;
        // dW[o][i] = sum_n dY[n][o] X[n][i]; column-major dW' (i x o) = X' dY'^T.
        CUBLAS_OK(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_T, in_features, out_features, n,
                              &one, x, in_features, g.diff.ptr, out_features, &zero,
                              GradPtr(node.first_param), in_features));
        CUDNN_OK(cudnnConvolutionBackwardBias(cudnn_, &one, g.out_desc, g.diff.ptr, &zero,
                                              g.bias_desc, GradPtr(node.first_param + 1)));
        if (need_dx) {
          // dX[n][i] = dY[n][o] W[o][i]; column-major dX' (i x n) = W' dY'.
          CUBLAS_OK(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, in_features, n, out_features,
                                &one, ParamPtr(node.first_param), in_features, g.diff.ptr,
                                out_features, &beta, in.diff.ptr, in_features));
        }
        break;
      }
      case Op::kRelu:
        if (need_dx) {
          CUDNN_OK(cudnnActivationBackward(cudnn_, relu_, &one, g.out_desc, g.out.ptr, g.out_desc,
                                           g.diff.ptr, in.out_desc, x, &beta, in.out_desc,
                                           in.diff.ptr));
        }
        break;
      case Op::kMaxPool:
      case Op::kGlobalAvgPool:
        if (need_dx) {
          CUDNN_OK(cudnnPoolingBackward(cudnn_, g.pool, &one, g.out_desc, g.out.ptr, g.out_desc,
                                        g.diff.ptr, in.out_desc, x, &beta, in.out_desc,
                                        in.diff.ptr));
        }
        break;
      case Op::kBatchNorm: {
        // cuDNN always computes dx; without an input gradient it goes to this node's own output
        // buffer, which no later backward step reads (its consumers ran before it).
        float* dx = need_dx ? in.diff.ptr : g.out.ptr;
        const float* bn_beta = need_dx ? &beta : &zero;
        CUDNN_OK(cudnnBatchNormalizationBackward(
            cudnn_, CUDNN_BATCHNORM_SPATIAL, &one, bn_beta, &one, &zero, in.out_desc, x,
            g.out_desc, g.diff.ptr, in.out_desc, dx, g.bn_desc, ParamPtr(node.first_param),
            GradPtr(node.first_param), GradPtr(node.first_param + 1), kBatchNormEpsilon,
            g.saved_mean.ptr, g.saved_inv_var.ptr));
        break;
      }
      case Op::kDropout:
        if (need_dx) {
          if (node.dropout > 0.0f) {
            CUDA_OK(cuda::MultiplyAccumulate(g.diff.ptr, g.mask.ptr, in.diff.ptr, g.diff.count,
                                             beta, stream_));
          } else {
            CUDNN_OK(cudnnAddTensor(cudnn_, &one, g.out_desc, g.diff.ptr, &beta, in.out_desc,
                                    in.diff.ptr));
          }
        }
        break;
      case Op::kFlatten:
        if (need_dx) {  // the same bytes, seen with the input's shape
          CUDNN_OK(cudnnAddTensor(cudnn_, &one, in.out_desc, g.diff.ptr, &beta, in.out_desc,
                                  in.diff.ptr));
        }
        break;
      case Op::kAdd:
        for (size_t k = 0; k < node.inputs.size(); ++k) {
          if (node.inputs[k] == 0) continue;
          NodeGpu& target = plan.nodes[node.inputs[k]];
          const float b = g.first_diff_write[k] ? 0.0f : 1.0f;
          CUDNN_OK(cudnnAddTensor(cudnn_, &one, g.out_desc, g.diff.ptr, &b, target.out_desc,
                                  target.diff.ptr));
        }
        break;
      case Op::kInput:
        break;
    }
  }
  return absl::OkStatus();
}

}  // namespace r2sp::models::cuda_internal
