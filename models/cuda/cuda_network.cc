// The CUDA backend; see cuda_network.h. For each batch size a plan holds the device buffers,
// tensor descriptors and chosen convolution algorithms; gradients of nodes with several
// consumers accumulate through cuDNN's and cuBLAS's beta = 1.
#include "models/cuda/cuda_network.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cmath>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "models/cuda/cuda_kernels.h"

namespace r2sp::models {
namespace {

constexpr double kBnEpsilon = 1e-5;
constexpr double kBnMomentum = 0.1;  // PyTorch's; cuDNN's running variance is unbiased too

absl::Status CudaStatus(cudaError_t e, const char* what, int line) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("CUDA error at cuda_network.cc:", line, " (", what,
                                          "): ", cudaGetErrorString(e)));
}
absl::Status CudnnStatus(cudnnStatus_t e, const char* what, int line) {
  if (e == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("cuDNN error at cuda_network.cc:", line, " (", what,
                                          "): ", cudnnGetErrorString(e)));
}
absl::Status CublasStatus(cublasStatus_t e, const char* what, int line) {
  if (e == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("cuBLAS error at cuda_network.cc:", line, " (", what,
                                          "): status ", static_cast<int>(e)));
}

#define CUDA_OK(expr) R2SP_CUDA_RETURN(CudaStatus((expr), #expr, __LINE__))
#define CUDNN_OK(expr) R2SP_CUDA_RETURN(CudnnStatus((expr), #expr, __LINE__))
#define CUBLAS_OK(expr) R2SP_CUDA_RETURN(CublasStatus((expr), #expr, __LINE__))
#define R2SP_CUDA_RETURN(status_expr)      \
  do {                                     \
    absl::Status s_ = (status_expr);       \
    if (!s_.ok()) return s_;               \
  } while (0)

// A device allocation of floats (or ints), freed with the plan.
template <typename T>
struct DeviceArray {
  T* ptr = nullptr;
  size_t count = 0;
  absl::Status Allocate(size_t n) {
    count = n;
    return CudaStatus(cudaMalloc(reinterpret_cast<void**>(&ptr), std::max<size_t>(n, 1) * sizeof(T)), "cudaMalloc", __LINE__);
  }
  ~DeviceArray() {
    if (ptr != nullptr) cudaFree(ptr);
  }
};

struct NodeGpu {
  cudnnTensorDescriptor_t out_desc = nullptr;
  DeviceArray<float> out, diff;
  // Convolution.
  cudnnFilterDescriptor_t filter = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnTensorDescriptor_t bias_desc = nullptr;
  cudnnConvolutionFwdAlgo_t fwd_algo{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo{};
  // Pooling, activation, batch norm, add.
  cudnnPoolingDescriptor_t pool = nullptr;
  cudnnTensorDescriptor_t bn_desc = nullptr;
  DeviceArray<float> saved_mean, saved_inv_var, mask;
  bool first_diff_write[2] = {true, true};  // per input: does backward initialise its gradient?
};

struct PlanGpu {
  int batch = 0;
  std::vector<NodeGpu> nodes;
  DeviceArray<float> images, loss, workspace;
  DeviceArray<int32_t> labels, correct;
  size_t workspace_bytes = 0;
  ~PlanGpu() {
    for (NodeGpu& n : nodes) {
      if (n.out_desc) cudnnDestroyTensorDescriptor(n.out_desc);
      if (n.filter) cudnnDestroyFilterDescriptor(n.filter);
      if (n.conv) cudnnDestroyConvolutionDescriptor(n.conv);
      if (n.bias_desc) cudnnDestroyTensorDescriptor(n.bias_desc);
      if (n.pool) cudnnDestroyPoolingDescriptor(n.pool);
      if (n.bn_desc) cudnnDestroyTensorDescriptor(n.bn_desc);
    }
  }
};

class CudaNetwork : public Network {
 public:
  CudaNetwork(Graph graph, const CudaOptions& options) : Network(std::move(graph)), options_(options) {}

  ~CudaNetwork() override {
    plans_.clear();
    if (relu_) cudnnDestroyActivationDescriptor(relu_);
    if (add_op_) cudnnDestroyOpTensorDescriptor(add_op_);
    if (cublas_) cublasDestroy(cublas_);
    if (cudnn_) cudnnDestroy(cudnn_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  absl::Status Init() {
    CUDA_OK(cudaSetDevice(options_.device));
    CUDA_OK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CUDNN_OK(cudnnCreate(&cudnn_));
    CUDNN_OK(cudnnSetStream(cudnn_, stream_));
    CUBLAS_OK(cublasCreate(&cublas_));
    CUBLAS_OK(cublasSetStream(cublas_, stream_));
    CUDNN_OK(cudnnCreateActivationDescriptor(&relu_));
    CUDNN_OK(cudnnSetActivationDescriptor(relu_, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
    CUDNN_OK(cudnnCreateOpTensorDescriptor(&add_op_));
    CUDNN_OK(cudnnSetOpTensorDescriptor(add_op_, CUDNN_OP_TENSOR_ADD, CUDNN_DATA_FLOAT,
                                        CUDNN_NOT_PROPAGATE_NAN));
    int64_t offset = 0;
    for (const Param& p : graph_.params) {
      offsets_.push_back(offset);
      offset += p.size();
    }
    R2SP_CUDA_RETURN(params_.Allocate(offset));
    R2SP_CUDA_RETURN(grads_.Allocate(offset));
    running_mean_.resize(graph_.nodes.size());
    running_var_.resize(graph_.nodes.size());
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      if (graph_.nodes[i].op != Op::kBatchNorm) continue;
      const int c = graph_.nodes[i].out.c;
      R2SP_CUDA_RETURN(running_mean_[i].Allocate(c));
      R2SP_CUDA_RETURN(running_var_[i].Allocate(c));
      std::vector<float> zeros(c, 0.0f), ones(c, 1.0f);
      CUDA_OK(cudaMemcpy(running_mean_[i].ptr, zeros.data(), c * sizeof(float), cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemcpy(running_var_[i].ptr, ones.data(), c * sizeof(float), cudaMemcpyHostToDevice));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<float> TrainStep(const float* params, const float* images,
                                  const int32_t* labels, int batch, float* grads) override {
    absl::StatusOr<PlanGpu*> plan = PlanFor(batch);
    if (!plan.ok()) return plan.status();
    R2SP_CUDA_RETURN(Upload(**plan, params, images, labels));
    R2SP_CUDA_RETURN(Forward(**plan, /*training=*/true));
    absl::StatusOr<double> loss = Loss(**plan, /*grad=*/true, nullptr);
    if (!loss.ok()) return loss.status();
    R2SP_CUDA_RETURN(Backward(**plan));
    CUDA_OK(cudaMemcpyAsync(grads, grads_.ptr, grads_.count * sizeof(float), cudaMemcpyDeviceToHost,
                            stream_));
    CUDA_OK(cudaStreamSynchronize(stream_));
    ++step_;
    return static_cast<float>(*loss / batch);
  }

  absl::StatusOr<EvalResult> Evaluate(const float* params, const float* images,
                                      const int32_t* labels, int batch) override {
    absl::StatusOr<PlanGpu*> plan = PlanFor(batch);
    if (!plan.ok()) return plan.status();
    R2SP_CUDA_RETURN(Upload(**plan, params, images, labels));
    R2SP_CUDA_RETURN(Forward(**plan, /*training=*/false));
    int64_t correct = 0;
    absl::StatusOr<double> loss = Loss(**plan, /*grad=*/false, &correct);
    if (!loss.ok()) return loss.status();
    return EvalResult{correct, *loss};
  }

  const float* logits() const override { return host_logits_.data(); }

 private:
  float* ParamPtr(int index) { return params_.ptr + offsets_[index]; }
  float* GradPtr(int index) { return grads_.ptr + offsets_[index]; }

  absl::StatusOr<PlanGpu*> PlanFor(int batch) {
    if (batch < 1) return absl::InvalidArgumentError("batch must be >= 1");
    auto it = plans_.find(batch);
    if (it != plans_.end()) return it->second.get();
    auto plan = std::make_unique<PlanGpu>();
    absl::Status built = Build(*plan, batch);
    if (!built.ok()) return built;
    return plans_.emplace(batch, std::move(plan)).first->second.get();
  }

  absl::Status Build(PlanGpu& plan, int batch);
  absl::Status Upload(PlanGpu& plan, const float* params, const float* images,
                      const int32_t* labels);
  absl::Status Forward(PlanGpu& plan, bool training);
  absl::StatusOr<double> Loss(PlanGpu& plan, bool grad, int64_t* correct);
  absl::Status Backward(PlanGpu& plan);

  const CudaOptions options_;
  cudaStream_t stream_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudnnActivationDescriptor_t relu_ = nullptr;
  cudnnOpTensorDescriptor_t add_op_ = nullptr;
  std::vector<int64_t> offsets_;
  DeviceArray<float> params_, grads_;
  std::vector<DeviceArray<float>> running_mean_, running_var_;
  std::map<int, std::unique_ptr<PlanGpu>> plans_;
  std::vector<float> host_logits_;
};

absl::Status CudaNetwork::Build(PlanGpu& plan, int batch) {
  plan.batch = batch;
  plan.nodes.resize(graph_.nodes.size());
  const int n = batch;
  R2SP_CUDA_RETURN(plan.images.Allocate(static_cast<size_t>(n) * graph_.input.size()));
  R2SP_CUDA_RETURN(plan.labels.Allocate(n));
  R2SP_CUDA_RETURN(plan.loss.Allocate(n));
  R2SP_CUDA_RETURN(plan.correct.Allocate(n));
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
      R2SP_CUDA_RETURN(g.out.Allocate(count));
      R2SP_CUDA_RETURN(g.diff.Allocate(count));
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
      R2SP_CUDA_RETURN(g.saved_mean.Allocate(node.out.c));
      R2SP_CUDA_RETURN(g.saved_inv_var.Allocate(node.out.c));
    }
    if (node.op == Op::kDropout) R2SP_CUDA_RETURN(g.mask.Allocate(count));
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
  R2SP_CUDA_RETURN(plan.workspace.Allocate((workspace + sizeof(float) - 1) / sizeof(float)));
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
              g.bn_desc, ParamPtr(node.first_param), ParamPtr(node.first_param + 1), kBnMomentum,
              running_mean_[i].ptr, running_var_[i].ptr, kBnEpsilon, g.saved_mean.ptr,
              g.saved_inv_var.ptr));
        } else {
          CUDNN_OK(cudnnBatchNormalizationForwardInference(
              cudnn_, CUDNN_BATCHNORM_SPATIAL, &one, &zero, in.out_desc, x, g.out_desc, g.out.ptr,
              g.bn_desc, ParamPtr(node.first_param), ParamPtr(node.first_param + 1),
              running_mean_[i].ptr, running_var_[i].ptr, kBnEpsilon));
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
            GradPtr(node.first_param), GradPtr(node.first_param + 1), kBnEpsilon, g.saved_mean.ptr,
            g.saved_inv_var.ptr));
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

}  // namespace

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
  auto net = std::make_unique<CudaNetwork>(graph, options);
  absl::Status status = net->Init();
  if (!status.ok()) return status;
  return std::unique_ptr<Network>(std::move(net));
}

}  // namespace r2sp::models
