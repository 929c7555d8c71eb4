// The CUDA backend's internals (models/cuda/cuda_network.cc has the overview): status macros,
// device buffers, the per-batch plan and the network class. Split by job: cuda_network.cc
// (initialisation, the plan, uploads, the loss and the entry point), cuda_passes.cc (the forward
// and backward passes). Not part of the models API: include models/cuda/cuda_network.h.
#ifndef R2SP_MODELS_CUDA_CUDA_NETWORK_INTERNAL_H_
#define R2SP_MODELS_CUDA_CUDA_NETWORK_INTERNAL_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "models/cuda/cuda_kernels.h"
#include "models/cuda/cuda_network.h"

namespace r2sp::models::cuda_internal {

inline absl::Status CudaStatus(cudaError_t e, const char* what, const char* file, int line) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("CUDA error at ", file, ":", line, " (", what,
                                          "): ", cudaGetErrorString(e)));
}
inline absl::Status CudnnStatus(cudnnStatus_t e, const char* what, const char* file, int line) {
  if (e == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("cuDNN error at ", file, ":", line, " (", what,
                                          "): ", cudnnGetErrorString(e)));
}
inline absl::Status CublasStatus(cublasStatus_t e, const char* what, const char* file, int line) {
  if (e == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("cuBLAS error at ", file, ":", line, " (", what,
                                          "): status ", static_cast<int>(e)));
}

// Return the failed call's error (naming the call, file and line) from the enclosing function.
#define CUDA_OK(expr) R2SP_RETURN_IF_ERROR(CudaStatus((expr), #expr, __FILE__, __LINE__))
#define CUDNN_OK(expr) R2SP_RETURN_IF_ERROR(CudnnStatus((expr), #expr, __FILE__, __LINE__))
#define CUBLAS_OK(expr) R2SP_RETURN_IF_ERROR(CublasStatus((expr), #expr, __FILE__, __LINE__))

// A device allocation of floats (or ints), freed with the plan.
template <typename T>
struct DeviceArray {
  T* ptr = nullptr;
  size_t count = 0;
  absl::Status Allocate(size_t n) {
    count = n;
    return CudaStatus(
        cudaMalloc(reinterpret_cast<void**>(&ptr), std::max<size_t>(n, 1) * sizeof(T)),
        "cudaMalloc", __FILE__, __LINE__);
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
    R2SP_RETURN_IF_ERROR(params_.Allocate(offset));
    R2SP_RETURN_IF_ERROR(grads_.Allocate(offset));
    running_mean_.resize(graph_.nodes.size());
    running_var_.resize(graph_.nodes.size());
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      if (graph_.nodes[i].op != Op::kBatchNorm) continue;
      const int c = graph_.nodes[i].out.c;
      R2SP_RETURN_IF_ERROR(running_mean_[i].Allocate(c));
      R2SP_RETURN_IF_ERROR(running_var_[i].Allocate(c));
      std::vector<float> zeros(c, 0.0f), ones(c, 1.0f);
      CUDA_OK(cudaMemcpy(running_mean_[i].ptr, zeros.data(), c * sizeof(float), cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemcpy(running_var_[i].ptr, ones.data(), c * sizeof(float), cudaMemcpyHostToDevice));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<float> TrainStep(const float* params, const float* images,
                                  const int32_t* labels, int batch, float* grads) override {
    R2SP_ASSIGN_OR_RETURN(PlanGpu* plan, PlanFor(batch));
    R2SP_RETURN_IF_ERROR(Upload(*plan, params, images, labels));
    R2SP_RETURN_IF_ERROR(Forward(*plan, /*training=*/true));
    R2SP_ASSIGN_OR_RETURN(const double loss, Loss(*plan, /*grad=*/true, nullptr));
    R2SP_RETURN_IF_ERROR(Backward(*plan));
    CUDA_OK(cudaMemcpyAsync(grads, grads_.ptr, grads_.count * sizeof(float), cudaMemcpyDeviceToHost,
                            stream_));
    CUDA_OK(cudaStreamSynchronize(stream_));
    if (gradient_ready_) gradient_ready_(0, static_cast<int64_t>(grads_.count));
    ++step_;
    return static_cast<float>(loss / batch);
  }

  absl::StatusOr<EvalResult> Evaluate(const float* params, const float* images,
                                      const int32_t* labels, int batch) override {
    R2SP_ASSIGN_OR_RETURN(PlanGpu* plan, PlanFor(batch));
    R2SP_RETURN_IF_ERROR(Upload(*plan, params, images, labels));
    R2SP_RETURN_IF_ERROR(Forward(*plan, /*training=*/false));
    int64_t correct = 0;
    R2SP_ASSIGN_OR_RETURN(const double loss, Loss(*plan, /*grad=*/false, &correct));
    return EvalResult{correct, loss};
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
    R2SP_RETURN_IF_ERROR(Build(*plan, batch));
    return plans_.emplace(batch, std::move(plan)).first->second.get();
  }

  absl::Status Build(PlanGpu& plan, int batch);
  absl::Status Upload(PlanGpu& plan, const float* params, const float* images,
                      const int32_t* labels);
  absl::StatusOr<double> Loss(PlanGpu& plan, bool grad, int64_t* correct);

  // Node `index` of a plan as a pass sees it (cuda_passes.cc).
  struct NodeArgs {
    int index;
    const Node& node;
    NodeGpu& g;
    int in_index;      // the first input
    NodeGpu& in;       // its buffers
    const float* x;    // its output (the images when it is the input node)
    bool need_dx() const { return in_index > 0; }  // the images need no gradient
  };
  NodeArgs ArgsFor(PlanGpu& plan, int i);
  // The passes: a loop over the nodes, a dispatch on the op, one function per op.
  absl::Status Forward(PlanGpu& plan, bool training);
  absl::Status ForwardNode(PlanGpu& plan, const NodeArgs& a, bool training);
  absl::Status ForwardConv(PlanGpu& plan, const NodeArgs& a);
  absl::Status ForwardLinear(PlanGpu& plan, const NodeArgs& a);
  absl::Status ForwardRelu(const NodeArgs& a);
  absl::Status ForwardPool(const NodeArgs& a);
  absl::Status ForwardBatchNorm(const NodeArgs& a, bool training);
  absl::Status ForwardDropout(const NodeArgs& a, bool training);
  absl::Status ForwardFlatten(const NodeArgs& a);
  absl::Status ForwardAdd(PlanGpu& plan, const NodeArgs& a);
  absl::Status Backward(PlanGpu& plan);
  absl::Status BackwardNode(PlanGpu& plan, const NodeArgs& a);
  absl::Status BackwardConv(PlanGpu& plan, const NodeArgs& a);
  absl::Status BackwardLinear(PlanGpu& plan, const NodeArgs& a);
  absl::Status BackwardRelu(const NodeArgs& a);
  absl::Status BackwardPool(const NodeArgs& a);
  absl::Status BackwardBatchNorm(const NodeArgs& a);
  absl::Status BackwardDropout(const NodeArgs& a);
  absl::Status BackwardFlatten(const NodeArgs& a);
  absl::Status BackwardAdd(PlanGpu& plan, const NodeArgs& a);

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

}  // namespace r2sp::models::cuda_internal

#endif  // R2SP_MODELS_CUDA_CUDA_NETWORK_INTERNAL_H_
