// The CUDA backend (cuda_network.h): CudaNetwork owns the library handles, the device
// parameters, gradients and running statistics, and one plan per batch size (cuda_plan.h);
// a step uploads the batch, queues ForwardPass (cuda_forward.h), the loss and BackwardPass
// (cuda_backward.h) node by node, with the parameters' and gradients' copies overlapping
// compute (copy_pipeline.h).
#include "models/cuda/cuda_network.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "models/cuda/copy_pipeline.h"
#include "models/cuda/cuda_backward.h"
#include "models/cuda/cuda_forward.h"
#include "models/cuda/cuda_kernels.h"
#include "models/cuda/cuda_plan.h"
#include "models/cuda/cuda_status.h"

namespace r2sp::models {
namespace cuda_internal {
namespace {

// Host memory page-locked by cudaHostRegister (Network::PinHostMemory).
class RegisteredHostMemory : public PinnedHostMemory {
 public:
  explicit RegisteredHostMemory(void* data) : data_(data) {}
  ~RegisteredHostMemory() override { cudaHostUnregister(data_); }

 private:
  void* const data_;
};

class CudaNetwork : public Network {
 public:
  CudaNetwork(Graph graph, const CudaOptions& options)
      : Network(std::move(graph)),
        options_(options),
        forward_(graph_, h_, device_, running_, options.seed, step_),
        backward_(graph_, h_, device_) {}

  ~CudaNetwork() override {
    plans_.clear();
    if (step_done_) cudaEventDestroy(step_done_);
    h_.Destroy();
  }

  absl::Status Init() {
    CUDA_OK(cudaSetDevice(options_.device));
    R2SP_RETURN_IF_ERROR(h_.Create());
    R2SP_RETURN_IF_ERROR(device_.Allocate(graph_));
    R2SP_RETURN_IF_ERROR(copies_.Init(graph_));
    CUDA_OK(cudaEventCreateWithFlags(&step_done_, cudaEventDisableTiming));
    R2SP_RETURN_IF_ERROR(running_.Allocate(graph_));
    return absl::OkStatus();
  }

  // One step, queued without waiting: parameters in group by group on the copy stream (each
  // layer's forward waits for its own; with set_params_needed, each group's upload is queued
  // once the host has it), images and labels in, forward, loss, backward, each
  // group's gradients out as backward produces them; then the host waits for the groups in
  // backward order, reporting each, and reads the loss.
  absl::StatusOr<float> TrainStep(const float* params, const float* images, const int32_t* labels,
                                  int batch, float* grads) override {
    R2SP_ASSIGN_OR_RETURN(PlanGpu * plan, PlanFor(batch));
    R2SP_RETURN_IF_ERROR(CheckLabels(labels, batch));
    R2SP_RETURN_IF_ERROR(copies_.BeginStep(h_.stream, params, device_.params.ptr, &params_needed_));
    R2SP_RETURN_IF_ERROR(UploadBatch(*plan, images, labels));
    R2SP_RETURN_IF_ERROR(Forward(*plan, /*training=*/true, &copies_));
    R2SP_RETURN_IF_ERROR(QueueLoss(*plan, /*grad=*/true));
    R2SP_RETURN_IF_ERROR(Backward(*plan, grads));
    CUDA_OK(cudaEventRecord(step_done_, h_.stream));
    R2SP_RETURN_IF_ERROR(copies_.FinishStep(gradient_ready_));
    // The loss (copied before backward) and any compute after the last gradient copy.
    CUDA_OK(cudaEventSynchronize(step_done_));
    last_plan_ = plan;
    ++step_;
    return static_cast<float>(SumLoss(*plan, nullptr) / batch);
  }

  absl::StatusOr<EvalResult> Evaluate(const float* params, const float* images,
                                      const int32_t* labels, int batch) override {
    R2SP_ASSIGN_OR_RETURN(PlanGpu * plan, PlanFor(batch));
    R2SP_RETURN_IF_ERROR(CheckLabels(labels, batch));
    CUDA_OK(cudaMemcpyAsync(device_.params.ptr, params, device_.params.count * sizeof(float),
                            cudaMemcpyHostToDevice, h_.stream));
    R2SP_RETURN_IF_ERROR(UploadBatch(*plan, images, labels));
    R2SP_RETURN_IF_ERROR(Forward(*plan, /*training=*/false, nullptr));
    R2SP_RETURN_IF_ERROR(QueueLoss(*plan, /*grad=*/false));
    CUDA_OK(cudaStreamSynchronize(h_.stream));
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
    const cudaError_t synced = cudaStreamSynchronize(h_.stream);
    CHECK_EQ(synced, cudaSuccess) << cudaGetErrorString(synced);
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      for (const DeviceArray<float>* d : {&running_.mean[i], &running_.var[i]}) {
        if (d->count == 0) continue;
        const size_t at = stats.size();
        stats.resize(at + d->count);
        const cudaError_t e =
            cudaMemcpy(stats.data() + at, d->ptr, d->count * sizeof(float), cudaMemcpyDeviceToHost);
        CHECK_EQ(e, cudaSuccess) << "reading batch-norm statistics: " << cudaGetErrorString(e);
      }
    }
    return stats;
  }

  absl::Status SetBatchNormStatistics(const std::vector<float>& stats) override {
    R2SP_RETURN_IF_ERROR(CheckStatisticsSize(stats.size()));
    size_t at = 0;
    CUDA_OK(cudaStreamSynchronize(h_.stream));
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      for (DeviceArray<float>* d : {&running_.mean[i], &running_.var[i]}) {
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
    const cudaError_t e = cudaMemcpy(host_logits_.data(), last_plan_->nodes.back().out.ptr,
                                     host_logits_.size() * sizeof(float), cudaMemcpyDeviceToHost);
    CHECK_EQ(e, cudaSuccess) << "copying the logits: " << cudaGetErrorString(e);
    return host_logits_.data();
  }

 protected:
  bool CallsParamsNeeded() const override { return true; }
  bool WritesFp16Gradients() const override { return true; }

 private:
  absl::StatusOr<PlanGpu*> PlanFor(int batch) {
    if (batch < 1) return absl::InvalidArgumentError("batch must be >= 1");
    auto it = plans_.find(batch);
    if (it != plans_.end()) return it->second.get();
    auto plan = std::make_unique<PlanGpu>();
    R2SP_RETURN_IF_ERROR(BuildPlan(graph_, h_.cudnn, options_.allow_tf32, batch, *plan));
    return plans_.emplace(batch, std::move(plan)).first->second.get();
  }

  // InvalidArgument for a label outside [0, classes): checked on the host, before any work.
  absl::Status CheckLabels(const int32_t* labels, int batch) const;
  absl::Status UploadBatch(PlanGpu& plan, const float* images, const int32_t* labels);
  // The loss kernel and the per-sample losses' copy to the plan's pinned host arrays.
  absl::Status QueueLoss(PlanGpu& plan, bool grad);
  // Once QueueLoss's work is done: the summed loss, and the correct count if asked.
  double SumLoss(const PlanGpu& plan, int64_t* correct) const;
  // Queues every node's forward; with `copies`, each node first waits for its parameters'
  // upload.
  absl::Status Forward(PlanGpu& plan, bool training, CopyPipeline* copies) {
    for (int i = 1; i < static_cast<int>(graph_.nodes.size()); ++i) {
      if (copies != nullptr) R2SP_RETURN_IF_ERROR(copies->WaitForParams(i, h_.stream));
      R2SP_RETURN_IF_ERROR(forward_.Queue(plan, i, training));
    }
    return absl::OkStatus();
  }
  // Queues each node's backward, then its gradients' copy to `host_grads` (or, with
  // set_fp16_gradients, their binary16 encoding's copy to fp16_grads_).
  absl::Status Backward(PlanGpu& plan, float* host_grads);

  const CudaOptions options_;
  CudaHandles h_;        // created by Init, destroyed by ~CudaNetwork after the plans
  DeviceParams device_;  // the parameters and gradients on the device
  // set_fp16_gradients: the encoder's output, allocated by the first step that needs it.
  DeviceArray<uint16_t> half_grads_;
  RunningStatistics running_;
  ForwardPass forward_;    // borrows h_, device_, running_
  BackwardPass backward_;  // borrows h_, device_
  std::map<int, std::unique_ptr<PlanGpu>> plans_;
  CopyPipeline copies_;
  cudaEvent_t step_done_ = nullptr;
  const PlanGpu* last_plan_ = nullptr;  // the last forward pass's, for logits()
  mutable std::vector<float> host_logits_;
};

absl::Status CudaNetwork::Backward(PlanGpu& plan, float* host_grads) {
  if (fp16_grads_ != nullptr && half_grads_.ptr == nullptr) {
    R2SP_RETURN_IF_ERROR(half_grads_.Allocate(device_.grads.count));
  }
  const CopyPipeline::HalfGradients half{half_grads_.ptr, fp16_grads_};
  const CopyPipeline::HalfGradients* to_half = fp16_grads_ != nullptr ? &half : nullptr;
  for (int i = static_cast<int>(graph_.nodes.size()) - 1; i > 0; --i) {
    R2SP_RETURN_IF_ERROR(backward_.Queue(plan, i));
    R2SP_RETURN_IF_ERROR(
        copies_.CopyGradients(i, h_.stream, device_.grads.ptr, host_grads, to_half));
  }
  return absl::OkStatus();
}

absl::Status CudaNetwork::CheckLabels(const int32_t* labels, int batch) const {
  const int classes = graph_.nodes.back().out.c;
  for (int k = 0; k < batch; ++k) {
    if (labels[k] < 0 || labels[k] >= classes) {
      return absl::InvalidArgumentError(
          absl::StrCat("label ", labels[k], " of sample ", k, " is outside [0, ", classes, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CudaNetwork::UploadBatch(PlanGpu& plan, const float* images, const int32_t* labels) {
  CUDA_OK(cudaMemcpyAsync(plan.images.ptr, images, plan.images.count * sizeof(float),
                          cudaMemcpyHostToDevice, h_.stream));
  CUDA_OK(cudaMemcpyAsync(plan.labels.ptr, labels, plan.batch * sizeof(int32_t),
                          cudaMemcpyHostToDevice, h_.stream));
  return absl::OkStatus();
}

absl::Status CudaNetwork::QueueLoss(PlanGpu& plan, bool grad) {
  const int n = plan.batch;
  NodeGpu& last = plan.nodes.back();
  const int classes = graph_.nodes.back().out.c;
  CUDA_OK(cuda::SoftmaxCrossEntropy(last.out.ptr, plan.labels.ptr, n, classes, plan.loss.ptr,
                                    plan.correct.ptr, grad ? last.diff.ptr : nullptr, h_.stream));
  CUDA_OK(cudaMemcpyAsync(plan.host_loss.ptr, plan.loss.ptr, n * sizeof(float),
                          cudaMemcpyDeviceToHost, h_.stream));
  CUDA_OK(cudaMemcpyAsync(plan.host_correct.ptr, plan.correct.ptr, n * sizeof(int32_t),
                          cudaMemcpyDeviceToHost, h_.stream));
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

}  // namespace
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
