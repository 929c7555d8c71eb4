// The CUDA backend's host-device copies for one training step, on a copy stream beside the
// compute stream, one ParamGroup (a node's parameters) at a time:
//   - parameters in: every group's upload is queued at the step's start (or, when the host's
//     parameters are still arriving from a pull, as the forward pass reaches each group and the
//     pull has written it); the forward pass waits for a node's own group only, so later
//     layers' copies overlap earlier layers' compute;
//   - gradients out: each group's copy starts as soon as backward has produced it, so copies
//     overlap the rest of backward, and the host hears of each group as it lands; for the fp16
//     push codec each group is first encoded to binary16 on the copy stream, and half the bytes
//     cross the bus.
// Events are created once; nothing is allocated per step, and nothing waits on the whole
// device. With page-locked host arrays (Network::PinHostMemory) the copies are asynchronous
// DMA; with pageable ones CUDA stages them and they are correct, only slower.
#ifndef R2SP_MODELS_CUDA_COPY_PIPELINE_H_
#define R2SP_MODELS_CUDA_COPY_PIPELINE_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "models/graph.h"
#include "models/network.h"

namespace r2sp::models::cuda_internal {

// Thread-compatible; used by the network's one thread. Destroy before the CUDA context goes.
class CopyPipeline {
 public:
  CopyPipeline() = default;
  CopyPipeline(const CopyPipeline&) = delete;
  CopyPipeline& operator=(const CopyPipeline&) = delete;
  ~CopyPipeline();

  // Creates the copy stream and the events for `graph`'s parameter groups.
  absl::Status Init(const Graph& graph);

  // The step starts: records the time origin on `compute` and uploads the parameters from
  // `host` to `device` (flat parameter arrays) on the copy stream: every group's upload queued
  // now, or with a non-empty `needed` (borrowed for the step), each group's queued by
  // WaitForParams once needed(offset, count) has returned (the host values are final then).
  absl::Status BeginStep(cudaStream_t compute, const float* host, float* device,
                         const Network::ParamsNeeded* needed = nullptr);
  // Before node `node`'s forward: `compute` waits for that node's parameters (if it has any),
  // whose upload is queued first if BeginStep left it to here. Each node once per step.
  absl::Status WaitForParams(int node, cudaStream_t compute);
  // Where binary16 gradients go: `device`, the encoder's output, and `host`, the copy's; both
  // the flat gradient's size.
  struct HalfGradients {
    uint16_t* device = nullptr;
    uint16_t* host = nullptr;
  };
  // After node `node`'s backward: its gradients (device -> host) are copied once `compute`
  // gets there; with `half`, encoded to binary16 (into half->device) and copied to half->host
  // instead of `host`. Does nothing for a node without parameters.
  absl::Status CopyGradients(int node, cudaStream_t compute, const float* device, float* host,
                             const HalfGradients* half = nullptr);
  // After the whole backward was queued: waits for each group's gradients in backward order
  // and calls `ready(offset, count)` as each lands (if set).
  absl::Status FinishStep(const Network::GradientReady& ready);

  // The last finished step's copy windows, relative to the start of BeginStep.
  std::vector<DeviceSpan> Spans() const { return spans_; }

 private:
  struct Group {
    ParamGroup params;
    cudaEvent_t uploaded = nullptr;  // copy stream, after this group's parameters
    cudaEvent_t computed = nullptr;  // compute stream, after this group's backward
    cudaEvent_t copied = nullptr;    // copy stream, after this group's gradients
  };

  absl::Status NewEvent(cudaEvent_t* event, bool timing);
  // Queues group `g`'s upload (host_ -> device_) and records its event.
  absl::Status Upload(Group& g);
  // Seconds from start_ to `event` (both completed).
  double SecondsTo(cudaEvent_t event) const;

  cudaStream_t copy_ = nullptr;
  std::vector<Group> groups_;
  std::vector<int> group_of_node_;  // -1: no parameters
  std::vector<int> backward_order_;  // group indices in the order their copies were queued
  // The step's parameters: where they come from and go, the host's callback when the uploads
  // wait for it (else null), and how many groups' uploads are queued.
  const float* host_ = nullptr;
  float* device_ = nullptr;
  const Network::ParamsNeeded* needed_ = nullptr;
  size_t uploaded_ = 0;
  // Timing events: the step's origin (compute stream), the copy stream's windows.
  cudaEvent_t start_ = nullptr, h2d_begin_ = nullptr, h2d_end_ = nullptr;
  cudaEvent_t d2h_begin_ = nullptr, d2h_end_ = nullptr;
  std::vector<DeviceSpan> spans_;
};

}  // namespace r2sp::models::cuda_internal

#endif  // R2SP_MODELS_CUDA_COPY_PIPELINE_H_
