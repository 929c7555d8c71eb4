// The CUDA backend; see cuda_network.h. For each batch size a plan holds the device buffers,
// tensor descriptors and chosen convolution algorithms; gradients of nodes with several
// consumers accumulate through cuDNN's and cuBLAS's beta = 1.
#include "models/cuda/cuda_network_internal.h"

namespace r2sp::models {
namespace cuda_internal {

absl::Status CudaNetwork::Build(PlanGpu& plan, int batch) {
  plan.batch = batch;
  plan.nodes.resize(graph_.nodes.size());
  const int n = batch;
  R2SP_RETURN_IF_ERROR(plan.images.Allocate(static_cast<size_t>(n) * graph_.input.size()));
  R2SP_RETURN_IF_ERROR(plan.labels.Allocate(n));
  R2SP_RETURN_IF_ERROR(plan.loss.Allocate(n));
  R2SP_RETURN_IF_ERROR(plan.correct.Allocate(n));
  size_t workspace = 0;
  std::vector<bool> written(graph_.nodes.size(), false);
  for (size_t i = 0; i < graph_.nodes.size(); ++i) {
    const Node& node = graph_.nodes[i];
    NodeGpu& g = plan.nodes[i];
    CUDNN_OK(cudnnCreateTensorDescriptor(&g.out_desc));
    CUDNN_OK(cudnnSetTensor4dDescriptor(g.out_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n,
                                        node.out.c, node.out.h, node.out.w));
    const size_t count = static_cast<size_t>(n) * node.out.size();
    if (node.op != Op::kInput) {
      R2SP_RETURN_IF_ERROR(g.out.Allocate(count));
      R2SP_RETURN_IF_ERROR(g.diff.Allocate(count));
    }
    if (node.op == Op::kConv) {
      const Shape& in = graph_.nodes[node.inputs[0]].out;
      CUDNN_OK(cudnnCreateFilterDescriptor(&g.filter));
      CUDNN_OK(cudnnSetFilter4dDescriptor(g.filter, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                          node.out.c, in.c, node.kernel, node.kernel));
      CUDNN_OK(cudnnCreateConvolutionDescriptor(&g.conv));
      CUDNN_OK(cudnnSetConvolution2dDescriptor(g.conv, node.pad, node.pad, node.stride,
                                               node.stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                               CUDNN_DATA_FLOAT));
      // As PyTorch: convolutions may use TF32 tensor cores unless told not to.
      CUDNN_OK(cudnnSetConvolutionMathType(g.conv, options_.allow_tf32 ? CUDNN_DEFAULT_MATH
                                                                       : CUDNN_FMA_MATH));
      const cudnnTensorDescriptor_t in_desc = plan.nodes[node.inputs[0]].out_desc;
      int got = 0;
      cudnnConvolutionFwdAlgoPerf_t fwd;
      CUDNN_OK(cudnnGetConvolutionForwardAlgorithm_v7(cudnn_, in_desc, g.filter, g.conv,
                                                      g.out_desc, 1, &got, &fwd));
      g.fwd_algo = fwd.algo;
      cudnnConvolutionBwdDataAlgoPerf_t bd;
      CUDNN_OK(cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnn_, g.filter, g.out_desc, g.conv,
                                                           in_desc, 1, &got, &bd));
      g.bwd_data_algo = bd.algo;
      cudnnConvolutionBwdFilterAlgoPerf_t bf;
      CUDNN_OK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnn_, in_desc, g.out_desc, g.conv,
                                                             g.filter, 1, &got, &bf));
      g.bwd_filter_algo = bf.algo;
      size_t bytes = 0;
      CUDNN_OK(cudnnGetConvolutionForwardWorkspaceSize(cudnn_, in_desc, g.filter, g.conv,
                                                       g.out_desc, g.fwd_algo, &bytes));
      workspace = std::max(workspace, bytes);
      CUDNN_OK(cudnnGetConvolutionBackwardDataWorkspaceSize(cudnn_, g.filter, g.out_desc, g.conv,
                                                            in_desc, g.bwd_data_algo, &bytes));
      workspace = std::max(workspace, bytes);
      CUDNN_OK(cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnn_, in_desc, g.out_desc, g.conv,
                                                              g.filter, g.bwd_filter_algo, &bytes));
      workspace = std::max(workspace, bytes);
    }
    if (node.bias) {
      CUDNN_OK(cudnnCreateTensorDescriptor(&g.bias_desc));
      CUDNN_OK(cudnnSetTensor4dDescriptor(g.bias_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1,
                                          node.out.c, 1, 1));
    }
    if (node.op == Op::kMaxPool || node.op == Op::kGlobalAvgPool) {
      const Shape& in = graph_.nodes[node.inputs[0]].out;
      const bool max = node.op == Op::kMaxPool;
      CUDNN_OK(cudnnCreatePoolingDescriptor(&g.pool));
      CUDNN_OK(cudnnSetPooling2dDescriptor(
          g.pool, max ? CUDNN_POOLING_MAX : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING,
          CUDNN_NOT_PROPAGATE_NAN, max ? node.kernel : in.h, max ? node.kernel : in.w, 0, 0,
          max ? node.stride : 1, max ? node.stride : 1));
    }
    if (node.op == Op::kBatchNorm) {
      CUDNN_OK(cudnnCreateTensorDescriptor(&g.bn_desc));
      CUDNN_OK(cudnnDeriveBNTensorDescriptor(g.bn_desc, g.out_desc, CUDNN_BATCHNORM_SPATIAL));
      R2SP_RETURN_IF_ERROR(g.saved_mean.Allocate(node.out.c));
      R2SP_RETURN_IF_ERROR(g.saved_inv_var.Allocate(node.out.c));
    }
    if (node.op == Op::kDropout) R2SP_RETURN_IF_ERROR(g.mask.Allocate(count));
  }
  // Which backward writes initialise an input's gradient (the first in backward order).
  written.back() = true;
  for (int i = static_cast<int>(graph_.nodes.size()) - 1; i > 0; --i) {
    const Node& node = graph_.nodes[i];
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const int in = node.inputs[k];
      plan.nodes[i].first_diff_write[k] = !written[in];
      written[in] = true;
    }
  }
  plan.workspace_bytes = workspace;
  R2SP_RETURN_IF_ERROR(plan.workspace.Allocate((workspace + sizeof(float) - 1) / sizeof(float)));
  return absl::OkStatus();
}

absl::Status CudaNetwork::Upload(PlanGpu& plan, const float* params, const float* images,
                                 const int32_t* labels) {
  CUDA_OK(cudaMemcpyAsync(params_.ptr, params, params_.count * sizeof(float),
                          cudaMemcpyHostToDevice, stream_));
  CUDA_OK(cudaMemcpyAsync(plan.images.ptr, images, plan.images.count * sizeof(float),
                          cudaMemcpyHostToDevice, stream_));
  CUDA_OK(cudaMemcpyAsync(plan.labels.ptr, labels, plan.batch * sizeof(int32_t),
                          cudaMemcpyHostToDevice, stream_));
  return absl::OkStatus();
}

absl::StatusOr<double> CudaNetwork::Loss(PlanGpu& plan, bool grad, int64_t* correct) {
  const int n = plan.batch;
  NodeGpu& last = plan.nodes.back();
  const int classes = graph_.nodes.back().out.c;
  CUDA_OK(cuda::SoftmaxCrossEntropy(last.out.ptr, plan.labels.ptr, n, classes, plan.loss.ptr,
                                    plan.correct.ptr, grad ? last.diff.ptr : nullptr, stream_));
  std::vector<float> loss(n);
  std::vector<int32_t> hits(n);
  host_logits_.resize(static_cast<size_t>(n) * classes);
  CUDA_OK(cudaMemcpyAsync(loss.data(), plan.loss.ptr, n * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  CUDA_OK(cudaMemcpyAsync(hits.data(), plan.correct.ptr, n * sizeof(int32_t), cudaMemcpyDeviceToHost,
                          stream_));
  CUDA_OK(cudaMemcpyAsync(host_logits_.data(), last.out.ptr, host_logits_.size() * sizeof(float),
                          cudaMemcpyDeviceToHost, stream_));
  CUDA_OK(cudaStreamSynchronize(stream_));
  double sum = 0;
  int64_t right = 0;
  for (int k = 0; k < n; ++k) {
    if (std::isnan(loss[k])) {
      return absl::InvalidArgumentError(absl::StrCat("label of sample ", k, " is outside [0, ",
                                                     classes, ")"));
    }
    sum += loss[k];
    right += hits[k];
  }
  if (correct != nullptr) *correct = right;
  return sum;
}

}  // namespace cuda_internal

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return count;
}

absl::StatusOr<std::unique_ptr<Network>> CreateCudaNetwork(const Graph& graph,
                                                           const CudaOptions& options) {
  if (CudaDeviceCount() <= options.device) {
    return absl::UnavailableError("no CUDA device is visible");
  }
  auto net = std::make_unique<cuda_internal::CudaNetwork>(graph, options);
  R2SP_RETURN_IF_ERROR(net->Init());
  return std::unique_ptr<Network>(std::move(net));
}

}  // namespace r2sp::models
