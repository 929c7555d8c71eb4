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
  R2SP_RETURN_IF_ERROR(plan.host_loss.Allocate(n));
  R2SP_RETURN_IF_ERROR(plan.host_correct.Allocate(n));
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
      R2SP_RETURN_IF_ERROR(
          ChooseAlgorithms(g, plan.nodes[node.inputs[0]].out_desc, &workspace));
      VLOG(1) << node.name << " (batch " << batch << "): cuDNN algorithms forward "
              << g.fwd_algo << ", backward data " << g.bwd_data_algo << ", backward filter "
              << g.bwd_filter_algo;
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

namespace {

// Whether an algorithm sums in the transformed (FFT or Winograd) domain. Their error bound is
// norm-wise, not per element (docs/MODELS.md, "GPU numerics"), so without TF32 (precise
// results, e.g. for comparing with the CPU backend element by element) they are not used.
bool Transforms(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
bool Transforms(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
bool Transforms(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

// The first of cuDNN's ranked heuristics that works and, when `precise`, sums directly in
// full fp32 (no FFT or Winograd, no tensor-core math). FailedPrecondition if none does.
template <typename Perf>
absl::StatusOr<decltype(Perf::algo)> Pick(const Perf* perf, int count, bool precise,
                                          const char* what) {
  for (int k = 0; k < count; ++k) {
    if (perf[k].status != CUDNN_STATUS_SUCCESS) continue;
    if (precise && (Transforms(perf[k].algo) || perf[k].mathType == CUDNN_TENSOR_OP_MATH ||
                    perf[k].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)) {
      continue;
    }
    return perf[k].algo;
  }
  return absl::FailedPreconditionError(
      absl::StrCat("cuDNN offers no usable ", what, " algorithm", precise ? " in fp32" : ""));
}

}  // namespace

absl::Status CudaNetwork::ChooseAlgorithms(NodeGpu& g, cudnnTensorDescriptor_t in_desc,
                                           size_t* workspace) {
  const bool precise = !options_.allow_tf32;
  int got = 0;
  cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  CUDNN_OK(cudnnGetConvolutionForwardAlgorithm_v7(cudnn_, in_desc, g.filter, g.conv, g.out_desc,
                                                  CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, fwd));
  R2SP_ASSIGN_OR_RETURN(g.fwd_algo, Pick(fwd, got, precise, "forward convolution"));
  cudnnConvolutionBwdDataAlgoPerf_t bd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  CUDNN_OK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
      cudnn_, g.filter, g.out_desc, g.conv, in_desc, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got,
      bd));
  R2SP_ASSIGN_OR_RETURN(g.bwd_data_algo, Pick(bd, got, precise, "backward-data convolution"));
  cudnnConvolutionBwdFilterAlgoPerf_t bf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  CUDNN_OK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
      cudnn_, in_desc, g.out_desc, g.conv, g.filter, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
      &got, bf));
  R2SP_ASSIGN_OR_RETURN(g.bwd_filter_algo,
                        Pick(bf, got, precise, "backward-filter convolution"));
  size_t bytes = 0;
  CUDNN_OK(cudnnGetConvolutionForwardWorkspaceSize(cudnn_, in_desc, g.filter, g.conv, g.out_desc,
                                                   g.fwd_algo, &bytes));
  *workspace = std::max(*workspace, bytes);
  CUDNN_OK(cudnnGetConvolutionBackwardDataWorkspaceSize(cudnn_, g.filter, g.out_desc, g.conv,
                                                        in_desc, g.bwd_data_algo, &bytes));
  *workspace = std::max(*workspace, bytes);
  CUDNN_OK(cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnn_, in_desc, g.out_desc, g.conv,
                                                          g.filter, g.bwd_filter_algo, &bytes));
  *workspace = std::max(*workspace, bytes);
  return absl::OkStatus();
}

absl::Status CudaNetwork::CheckLabels(const int32_t* labels, int batch) const {
  const int classes = graph_.nodes.back().out.c;
  for (int k = 0; k < batch; ++k) {
    if (labels[k] < 0 || labels[k] >= classes) {
      return absl::InvalidArgumentError(absl::StrCat("label ", labels[k], " of sample ", k,
                                                     " is outside [0, ", classes, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CudaNetwork::UploadBatch(PlanGpu& plan, const float* images,
                                      const int32_t* labels) {
  CUDA_OK(cudaMemcpyAsync(plan.images.ptr, images, plan.images.count * sizeof(float),
                          cudaMemcpyHostToDevice, stream_));
  CUDA_OK(cudaMemcpyAsync(plan.labels.ptr, labels, plan.batch * sizeof(int32_t),
                          cudaMemcpyHostToDevice, stream_));
  return absl::OkStatus();
}

absl::Status CudaNetwork::QueueLoss(PlanGpu& plan, bool grad) {
  const int n = plan.batch;
  NodeGpu& last = plan.nodes.back();
  const int classes = graph_.nodes.back().out.c;
  CUDA_OK(cuda::SoftmaxCrossEntropy(last.out.ptr, plan.labels.ptr, n, classes, plan.loss.ptr,
                                    plan.correct.ptr, grad ? last.diff.ptr : nullptr, stream_));
  CUDA_OK(cudaMemcpyAsync(plan.host_loss.ptr, plan.loss.ptr, n * sizeof(float),
                          cudaMemcpyDeviceToHost, stream_));
  CUDA_OK(cudaMemcpyAsync(plan.host_correct.ptr, plan.correct.ptr, n * sizeof(int32_t),
                          cudaMemcpyDeviceToHost, stream_));
  return absl::OkStatus();
}

double CudaNetwork::SumLoss(const PlanGpu& plan, int64_t* correct) const {
  double sum = 0;
  int64_t right = 0;
  for (int k = 0; k < plan.batch; ++k) {
    sum += plan.host_loss.ptr[k];
    right += plan.host_correct.ptr[k];
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
