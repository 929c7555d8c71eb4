// See copy_pipeline.h.
#include "models/cuda/copy_pipeline.h"

#include "common/codec/cuda/codec_kernels.h"
#include "models/cuda/cuda_status.h"

namespace r2sp::models::cuda_internal {

CopyPipeline::~CopyPipeline() {
  for (Group& g : groups_) {
    for (cudaEvent_t e : {g.uploaded, g.computed, g.copied}) {
      if (e != nullptr) cudaEventDestroy(e);
    }
  }
  for (cudaEvent_t e : {start_, h2d_begin_, h2d_end_, d2h_begin_, d2h_end_}) {
    if (e != nullptr) cudaEventDestroy(e);
  }
  if (copy_ != nullptr) cudaStreamDestroy(copy_);
}

absl::Status CopyPipeline::NewEvent(cudaEvent_t* event, bool timing) {
  CUDA_OK(cudaEventCreateWithFlags(event, timing ? cudaEventDefault : cudaEventDisableTiming));
  return absl::OkStatus();
}

absl::Status CopyPipeline::Init(const Graph& graph) {
  CUDA_OK(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
  group_of_node_.assign(graph.nodes.size(), -1);
  for (const ParamGroup& p : graph.ParamGroups()) {
    group_of_node_[p.node] = static_cast<int>(groups_.size());
    groups_.push_back(Group{p});
    Group& g = groups_.back();
    R2SP_RETURN_IF_ERROR(NewEvent(&g.uploaded, false));
    R2SP_RETURN_IF_ERROR(NewEvent(&g.computed, false));
    R2SP_RETURN_IF_ERROR(NewEvent(&g.copied, false));
  }
  for (cudaEvent_t* e : {&start_, &h2d_begin_, &h2d_end_, &d2h_begin_, &d2h_end_}) {
    R2SP_RETURN_IF_ERROR(NewEvent(e, true));
  }
  backward_order_.reserve(groups_.size());
  return absl::OkStatus();
}

absl::Status CopyPipeline::BeginStep(cudaStream_t compute, const float* host, float* device,
                                     const Network::ParamsNeeded* needed) {
  backward_order_.clear();
  CUDA_OK(cudaEventRecord(start_, compute));
  // The copy stream starts after the origin, so no span begins before it.
  CUDA_OK(cudaStreamWaitEvent(copy_, start_, 0));
  CUDA_OK(cudaEventRecord(h2d_begin_, copy_));
  host_ = host;
  device_ = device;
  uploaded_ = 0;
  needed_ = needed != nullptr && *needed ? needed : nullptr;
  if (needed_ == nullptr) {
    for (Group& g : groups_) R2SP_RETURN_IF_ERROR(Upload(g));
  }
  return absl::OkStatus();
}

absl::Status CopyPipeline::Upload(Group& g) {
  const ParamGroup& p = g.params;
  CUDA_OK(cudaMemcpyAsync(device_ + p.offset, host_ + p.offset, p.count * sizeof(float),
                          cudaMemcpyHostToDevice, copy_));
  CUDA_OK(cudaEventRecord(g.uploaded, copy_));
  if (++uploaded_ == groups_.size()) CUDA_OK(cudaEventRecord(h2d_end_, copy_));
  return absl::OkStatus();
}

absl::Status CopyPipeline::WaitForParams(int node, cudaStream_t compute) {
  const int index = group_of_node_[node];
  if (index < 0) return absl::OkStatus();
  Group& g = groups_[index];
  if (needed_ != nullptr) {
    // The compute stream runs the layers queued so far while the host waits for the pull.
    (*needed_)(g.params.offset, g.params.count);
    R2SP_RETURN_IF_ERROR(Upload(g));
  }
  CUDA_OK(cudaStreamWaitEvent(compute, g.uploaded, 0));
  return absl::OkStatus();
}

absl::Status CopyPipeline::CopyGradients(int node, cudaStream_t compute, const float* device,
                                         float* host, const HalfGradients* half) {
  const int index = group_of_node_[node];
  if (index < 0) return absl::OkStatus();
  Group& g = groups_[index];
  CUDA_OK(cudaEventRecord(g.computed, compute));
  CUDA_OK(cudaStreamWaitEvent(copy_, g.computed, 0));
  if (backward_order_.empty()) CUDA_OK(cudaEventRecord(d2h_begin_, copy_));
  const ParamGroup& p = g.params;
  if (half != nullptr) {
    // The encoding is one pass over the group, on the copy stream: backward goes on meanwhile.
    CUDA_OK(codec::cuda::EncodeFp16(device + p.offset, p.count, half->device + p.offset, copy_));
    CUDA_OK(cudaMemcpyAsync(half->host + p.offset, half->device + p.offset,
                            p.count * sizeof(uint16_t), cudaMemcpyDeviceToHost, copy_));
  } else {
    CUDA_OK(cudaMemcpyAsync(host + p.offset, device + p.offset, p.count * sizeof(float),
                            cudaMemcpyDeviceToHost, copy_));
  }
  CUDA_OK(cudaEventRecord(g.copied, copy_));
  backward_order_.push_back(index);
  if (backward_order_.size() == groups_.size()) CUDA_OK(cudaEventRecord(d2h_end_, copy_));
  return absl::OkStatus();
}

absl::Status CopyPipeline::FinishStep(const Network::GradientReady& ready) {
  if (backward_order_.size() != groups_.size() || uploaded_ != groups_.size()) {
    return absl::InternalError("a step finished without copying every parameter group");
  }
  if (groups_.empty()) return absl::OkStatus();
  for (int index : backward_order_) {
    const Group& g = groups_[index];
    CUDA_OK(cudaEventSynchronize(g.copied));
    if (ready) ready(g.params.offset, g.params.count);
  }
  CUDA_OK(cudaEventSynchronize(d2h_end_));
  spans_.clear();
  spans_.push_back({"h2d_params", SecondsTo(h2d_begin_), SecondsTo(h2d_end_)});
  spans_.push_back({"d2h_grads", SecondsTo(d2h_begin_), SecondsTo(d2h_end_)});
  return absl::OkStatus();
}

double CopyPipeline::SecondsTo(cudaEvent_t event) const {
  float ms = 0;
  if (cudaEventElapsedTime(&ms, start_, event) != cudaSuccess) {
    cudaGetLastError();  // a span we cannot time is left at 0, not an error of the step
    return 0;
  }
  return ms / 1e3;
}

}  // namespace r2sp::models::cuda_internal
