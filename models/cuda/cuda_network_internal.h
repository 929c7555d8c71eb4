// The CUDA backend's internals (models/cuda/cuda_network.cc has the overview): device and
// pinned buffers, the per-batch plan and the network class. Split by job: cuda_network.cc
// (the plan and its algorithms, uploads, the loss and the entry point), cuda_passes.cc (the
// forward and backward passes), copy_pipeline.* (the step's host-device copies), cuda_status.h
// (errors). Not part of the models API: include models/cuda/cuda_network.h.
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
#include "models/cuda/copy_pipeline.h"
#include "models/cuda/cuda_kernels.h"
#include "models/cuda/cuda_network.h"
#include "models/cuda/cuda_status.h"

namespace r2sp::models::cuda_internal {

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

// Page-locked host memory (cudaMallocHost), for the small per-step results read back.
template <typename T>
struct PinnedArray {
  T* ptr = nullptr;
  absl::Status Allocate(size_t n) {
    const size_t bytes = std::max<size_t>(n, 1) * sizeof(T);
    return CudaStatus(cudaMallocHost(reinterpret_cast<void**>(&ptr), bytes), "cudaMallocHost",
                      __FILE__, __LINE__);
  }
  ~PinnedArray() {
    if (ptr != nullptr) cudaFreeHost(ptr);
  }
};

// Host memory page-locked by cudaHostRegister (Network::PinHostMemory).
class RegisteredHostMemory : public PinnedHostMemory {
 public:
  explicit RegisteredHostMemory(void* data) : data_(data) {}
  ~RegisteredHostMemory() override { cudaHostUnregister(data_); }

 private:
  void* const data_;
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
  PinnedArray<float> host_loss;  // per sample, read back after the step
  PinnedArray<int32_t> host_correct;
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
    if (step_done_) cudaEventDestroy(step_done_);
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
    R2SP_RETURN_IF_ERROR(copies_.Init(graph_));
    CUDA_OK(cudaEventCreateWithFlags(&step_done_, cudaEventDisableTiming));
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

  // One step, queued without waiting: parameters in group by group on the copy stream (each
  // layer's forward waits for its own; with set_params_needed, each group's upload is queued
  // once the host has it), images and labels in, forward, loss, backward, each
  // group's gradients out as backward produces them; then the host waits for the groups in
  // backward order, reporting each, and reads the loss.
  absl::StatusOr<float> TrainStep(const float* params, const float* images,
                                  const int32_t* labels, int batch, float* grads) override {
    R2SP_ASSIGN_OR_RETURN(PlanGpu* plan, PlanFor(batch));
    R2SP_RETURN_IF_ERROR(CheckLabels(labels, batch));
    R2SP_RETURN_IF_ERROR(copies_.BeginStep(stream_, params, params_.ptr, &params_needed_));
    R2SP_RETURN_IF_ERROR(UploadBatch(*plan, images, labels));
    R2SP_RETURN_IF_ERROR(Forward(*plan, /*training=*/true, &copies_));
    R2SP_RETURN_IF_ERROR(QueueLoss(*plan, /*grad=*/true));
    R2SP_RETURN_IF_ERROR(Backward(*plan, grads));
    CUDA_OK(cudaEventRecord(step_done_, stream_));
    R2SP_RETURN_IF_ERROR(copies_.FinishStep(gradient_ready_));
    // The loss (copied before backward) and any compute after the last gradient copy.
    CUDA_OK(cudaEventSynchronize(step_done_));
    last_plan_ = plan;
    ++step_;
    return static_cast<float>(SumLoss(*plan, nullptr) / batch);
  }

  absl::StatusOr<EvalResult> Evaluate(const float* params, const float* images,
                                      const int32_t* labels, int batch) override {
    R2SP_ASSIGN_OR_RETURN(PlanGpu* plan, PlanFor(batch));
    R2SP_RETURN_IF_ERROR(CheckLabels(labels, batch));
    CUDA_OK(cudaMemcpyAsync(params_.ptr, params, params_.count * sizeof(float),
                            cudaMemcpyHostToDevice, stream_));
    R2SP_RETURN_IF_ERROR(UploadBatch(*plan, images, labels));
    R2SP_RETURN_IF_ERROR(Forward(*plan, /*training=*/false, nullptr));
    R2SP_RETURN_IF_ERROR(QueueLoss(*plan, /*grad=*/false));
    CUDA_OK(cudaStreamSynchronize(stream_));
    last_plan_ = plan;
    int64_t correct = 0;
    const double loss = SumLoss(*plan, &correct);
    return EvalResult{correct, loss};
  }

  absl::StatusOr<std::unique_ptr<PinnedHostMemory>> PinHostMemory(void* data,
                                                                  size_t bytes) override {
    const cudaError_t e = cudaHostRegister(data, bytes, cudaHostRegisterPortable);
    if (e != cudaSuccess) {
      cudaGetLastError();  // not sticky: later kernel launches must not see it
      return CudaStatus(e, "cudaHostRegister", __FILE__, __LINE__);
    }
    return std::unique_ptr<PinnedHostMemory>(new RegisteredHostMemory(data));
  }

  std::vector<DeviceSpan> LastStepDeviceSpans() const override { return copies_.Spans(); }

  std::vector<float> BatchNormStatistics() const override {
    std::vector<float> stats;
    // cudaMemcpy runs on the legacy stream, which does not wait for our non-blocking one.
    const cudaError_t synced = cudaStreamSynchronize(stream_);
    CHECK_EQ(synced, cudaSuccess) << cudaGetErrorString(synced);
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      for (const DeviceArray<float>* d : {&running_mean_[i], &running_var_[i]}) {
        if (d->count == 0) continue;
        const size_t at = stats.size();
        stats.resize(at + d->count);
        const cudaError_t e = cudaMemcpy(stats.data() + at, d->ptr, d->count * sizeof(float),
                                         cudaMemcpyDeviceToHost);
        CHECK_EQ(e, cudaSuccess) << "reading batch-norm statistics: " << cudaGetErrorString(e);
      }
    }
    return stats;
  }

  absl::Status SetBatchNormStatistics(const std::vector<float>& stats) override {
    R2SP_RETURN_IF_ERROR(CheckStatisticsSize(stats.size()));
    size_t at = 0;
    CUDA_OK(cudaStreamSynchronize(stream_));
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      for (DeviceArray<float>* d : {&running_mean_[i], &running_var_[i]}) {
        if (d->count == 0) continue;
        CUDA_OK(cudaMemcpy(d->ptr, stats.data() + at, d->count * sizeof(float),
                           cudaMemcpyHostToDevice));
        at += d->count;
      }
    }
    return absl::OkStatus();
  }

  // Copies the last forward pass's logits back (for tests; not on the step path).
  const float* logits() const override {
    host_logits_.clear();
    if (last_plan_ == nullptr) return host_logits_.data();
    host_logits_.resize(static_cast<size_t>(last_plan_->batch) * graph_.nodes.back().out.c);
    const cudaError_t e =
        cudaMemcpy(host_logits_.data(), last_plan_->nodes.back().out.ptr,
                   host_logits_.size() * sizeof(float), cudaMemcpyDeviceToHost);
    CHECK_EQ(e, cudaSuccess) << "copying the logits: " << cudaGetErrorString(e);
    return host_logits_.data();
  }

 protected:
  bool CallsParamsNeeded() const override { return true; }
  bool WritesFp16Gradients() const override { return true; }

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
  // Convolution algorithms for node `g` (cuda_network.cc).
  absl::Status ChooseAlgorithms(NodeGpu& g, cudnnTensorDescriptor_t in_desc, size_t* workspace);
  // InvalidArgument for a label outside [0, classes): checked on the host, before any work.
  absl::Status CheckLabels(const int32_t* labels, int batch) const;
  absl::Status UploadBatch(PlanGpu& plan, const float* images, const int32_t* labels);
  // The loss kernel and the per-sample losses' copy to the plan's pinned host arrays.
  absl::Status QueueLoss(PlanGpu& plan, bool grad);
  // Once QueueLoss's work is done: the summed loss, and the correct count if asked.
  double SumLoss(const PlanGpu& plan, int64_t* correct) const;

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
  // With `copies`, each node first waits for its parameters' upload.
  absl::Status Forward(PlanGpu& plan, bool training, CopyPipeline* copies);
  absl::Status ForwardNode(PlanGpu& plan, const NodeArgs& a, bool training);
  absl::Status ForwardConv(PlanGpu& plan, const NodeArgs& a);
  absl::Status ForwardLinear(PlanGpu& plan, const NodeArgs& a);
  absl::Status ForwardRelu(const NodeArgs& a);
  absl::Status ForwardPool(const NodeArgs& a);
  absl::Status ForwardBatchNorm(const NodeArgs& a, bool training);
  absl::Status ForwardDropout(const NodeArgs& a, bool training);
  absl::Status ForwardFlatten(const NodeArgs& a);
  absl::Status ForwardAdd(PlanGpu& plan, const NodeArgs& a);
  // Queues each node's backward, then its gradients' copy to `host_grads` (or, with
  // set_fp16_gradients, their binary16 encoding's copy to fp16_grads_).
  absl::Status Backward(PlanGpu& plan, float* host_grads);
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
  // set_fp16_gradients: the encoder's output, allocated by the first step that needs it.
  DeviceArray<uint16_t> half_grads_;
  std::vector<DeviceArray<float>> running_mean_, running_var_;
  std::map<int, std::unique_ptr<PlanGpu>> plans_;
  CopyPipeline copies_;
  cudaEvent_t step_done_ = nullptr;
  const PlanGpu* last_plan_ = nullptr;  // the last forward pass's, for logits()
  mutable std::vector<float> host_logits_;
};

}  // namespace r2sp::models::cuda_internal

#endif  // R2SP_MODELS_CUDA_CUDA_NETWORK_INTERNAL_H_
