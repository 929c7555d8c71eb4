// BuildPlan and ArgsFor (cuda_plan.h): a plan's buffers, descriptors and convolution
// algorithms, chosen once per batch size.
#include "models/cuda/cuda_plan.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace r2sp::models::cuda_internal {
namespace {

// Whether an algorithm sums in the transformed (FFT or Winograd) domain. Their error bound is
// norm-wise, not per element (docs/ARCHITECTURE.md, GPU numerics), so without TF32 (precise
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

// Node `g`'s three convolution algorithms from cuDNN's heuristics (see Pick); raises
// `*workspace` to the largest workspace they need.
absl::Status ChooseAlgorithms(cudnnHandle_t cudnn, bool precise, NodeGpu& g,
                              cudnnTensorDescriptor_t in_desc, size_t* workspace) {
  int got = 0;
  cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  CUDNN_OK(cudnnGetConvolutionForwardAlgorithm_v7(cudnn, in_desc, g.filter, g.conv, g.out_desc,
                                                  CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, fwd));
  R2SP_ASSIGN_OR_RETURN(g.fwd_algo, Pick(fwd, got, precise, "forward convolution"));
  cudnnConvolutionBwdDataAlgoPerf_t bd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  CUDNN_OK(cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnn, g.filter, g.out_desc, g.conv, in_desc,
                                                       CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got,
                                                       bd));
  R2SP_ASSIGN_OR_RETURN(g.bwd_data_algo, Pick(bd, got, precise, "backward-data convolution"));
  cudnnConvolutionBwdFilterAlgoPerf_t bf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  CUDNN_OK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
      cudnn, in_desc, g.out_desc, g.conv, g.filter, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got,
      bf));
  R2SP_ASSIGN_OR_RETURN(g.bwd_filter_algo, Pick(bf, got, precise, "backward-filter convolution"));
  size_t bytes = 0;
  CUDNN_OK(cudnnGetConvolutionForwardWorkspaceSize(cudnn, in_desc, g.filter, g.conv, g.out_desc,
                                                   g.fwd_algo, &bytes));
  *workspace = std::max(*workspace, bytes);
  CUDNN_OK(cudnnGetConvolutionBackwardDataWorkspaceSize(cudnn, g.filter, g.out_desc, g.conv,
                                                        in_desc, g.bwd_data_algo, &bytes));
  *workspace = std::max(*workspace, bytes);
  CUDNN_OK(cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnn, in_desc, g.out_desc, g.conv,
                                                          g.filter, g.bwd_filter_algo, &bytes));
  *workspace = std::max(*workspace, bytes);
  return absl::OkStatus();
}

}  // namespace

absl::Status CudaHandles::Create() {
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CUDNN_OK(cudnnCreate(&cudnn));
  CUDNN_OK(cudnnSetStream(cudnn, stream));
  CUBLAS_OK(cublasCreate(&cublas));
  CUBLAS_OK(cublasSetStream(cublas, stream));
  CUDNN_OK(cudnnCreateActivationDescriptor(&relu));
  CUDNN_OK(cudnnSetActivationDescriptor(relu, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  CUDNN_OK(cudnnCreateOpTensorDescriptor(&add_op));
  CUDNN_OK(cudnnSetOpTensorDescriptor(add_op, CUDNN_OP_TENSOR_ADD, CUDNN_DATA_FLOAT,
                                      CUDNN_NOT_PROPAGATE_NAN));
  return absl::OkStatus();
}

void CudaHandles::Destroy() {
  if (relu) cudnnDestroyActivationDescriptor(relu);
  if (add_op) cudnnDestroyOpTensorDescriptor(add_op);
  if (cublas) cublasDestroy(cublas);
  if (cudnn) cudnnDestroy(cudnn);
  if (stream) cudaStreamDestroy(stream);
  relu = nullptr;
  add_op = nullptr;
  cublas = nullptr;
  cudnn = nullptr;
  stream = nullptr;
}

absl::Status DeviceParams::Allocate(const Graph& graph) {
  int64_t offset = 0;
  offsets.clear();
  for (const models::Param& p : graph.params) {  // not the member function Param
    offsets.push_back(offset);
    offset += p.size();
  }
  R2SP_RETURN_IF_ERROR(params.Allocate(offset));
  return grads.Allocate(offset);
}

absl::Status RunningStatistics::Allocate(const Graph& graph) {
  mean.resize(graph.nodes.size());
  var.resize(graph.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (graph.nodes[i].op != Op::kBatchNorm) continue;
    const int c = graph.nodes[i].out.c;
    R2SP_RETURN_IF_ERROR(mean[i].Allocate(c));
    R2SP_RETURN_IF_ERROR(var[i].Allocate(c));
    const std::vector<float> zeros(c, 0.0f), ones(c, 1.0f);
    CUDA_OK(cudaMemcpy(mean[i].ptr, zeros.data(), c * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(var[i].ptr, ones.data(), c * sizeof(float), cudaMemcpyHostToDevice));
  }
  return absl::OkStatus();
}

NodeArgs ArgsFor(const Graph& graph, PlanGpu& plan, int i) {
  const Node& node = graph.nodes[i];
  const int in_index = node.inputs[0];
  NodeGpu& in = plan.nodes[in_index];
  return NodeArgs{i,        node, plan.nodes[i],
                  in_index, in,   in_index == 0 ? plan.images.ptr : in.out.ptr};
}

absl::Status BuildPlan(const Graph& graph, cudnnHandle_t cudnn, bool allow_tf32, int batch,
                       PlanGpu& plan) {
  plan.batch = batch;
  plan.nodes.resize(graph.nodes.size());
  const int n = batch;
  R2SP_RETURN_IF_ERROR(plan.images.Allocate(static_cast<size_t>(n) * graph.input.size()));
  R2SP_RETURN_IF_ERROR(plan.labels.Allocate(n));
  R2SP_RETURN_IF_ERROR(plan.loss.Allocate(n));
  R2SP_RETURN_IF_ERROR(plan.correct.Allocate(n));
  R2SP_RETURN_IF_ERROR(plan.host_loss.Allocate(n));
  R2SP_RETURN_IF_ERROR(plan.host_correct.Allocate(n));
  size_t workspace = 0;
  std::vector<bool> written(graph.nodes.size(), false);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& node = graph.nodes[i];
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
      const Shape& in = graph.nodes[node.inputs[0]].out;
      CUDNN_OK(cudnnCreateFilterDescriptor(&g.filter));
      CUDNN_OK(cudnnSetFilter4dDescriptor(g.filter, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, node.out.c,
                                          in.c, node.kernel, node.kernel));
      CUDNN_OK(cudnnCreateConvolutionDescriptor(&g.conv));
      CUDNN_OK(cudnnSetConvolution2dDescriptor(g.conv, node.pad, node.pad, node.stride, node.stride,
                                               1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
      // As PyTorch: convolutions may use TF32 tensor cores unless told not to.
      CUDNN_OK(
          cudnnSetConvolutionMathType(g.conv, allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
      R2SP_RETURN_IF_ERROR(
          ChooseAlgorithms(cudnn, !allow_tf32, g, plan.nodes[node.inputs[0]].out_desc, &workspace));
      VLOG(1) << node.name << " (batch " << batch << "): cuDNN algorithms forward " << g.fwd_algo
              << ", backward data " << g.bwd_data_algo << ", backward filter " << g.bwd_filter_algo;
    }
    if (node.bias) {
      CUDNN_OK(cudnnCreateTensorDescriptor(&g.bias_desc));
      CUDNN_OK(cudnnSetTensor4dDescriptor(g.bias_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1,
                                          node.out.c, 1, 1));
    }
    if (node.op == Op::kMaxPool || node.op == Op::kGlobalAvgPool) {
      const Shape& in = graph.nodes[node.inputs[0]].out;
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
  for (int i = static_cast<int>(graph.nodes.size()) - 1; i > 0; --i) {
    const Node& node = graph.nodes[i];
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

}  // namespace r2sp::models::cuda_internal
