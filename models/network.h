// A Graph instantiated on a device: training steps (forward, softmax cross-entropy, backward)
// and evaluation, reading parameters from and writing gradients to flat arrays laid out as
// Graph::params (the parameter servers' layout), so pulled values are used without copies.
// The interface only: CreateNetwork (models/backend.h) makes one for a device.
#ifndef R2SP_MODELS_NETWORK_H_
#define R2SP_MODELS_NETWORK_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "models/graph.h"

namespace r2sp::models {

struct EvalResult {
  int64_t correct = 0;
  double loss_sum = 0;  // summed over the samples
};

// Host memory page-locked by Network::PinHostMemory, for as long as this object lives.
class PinnedHostMemory {
 public:
  virtual ~PinnedHostMemory() = default;
};

// Part of the last TrainStep on the device: seconds from the step's start (the host's call).
struct DeviceSpan {
  std::string name;  // "h2d_params" (parameters in), "d2h_grads" (gradients out)
  double begin_seconds = 0, end_seconds = 0;
};

// Thread-compatible: one thread uses a Network at a time. Batch sizes may change from call to
// call (heterogeneity-aware batching); each new size builds its execution plan once and keeps
// it.
class Network {
 public:
  virtual ~Network() = default;

  // One training step on `batch` samples: images are N*C*H*W floats (NCHW), labels in
  // [0, num_classes). Reads `params` (num_parameters floats), overwrites `grads` (same size)
  // with the gradient of the mean loss. Updates batch-norm running statistics. Returns the
  // mean loss. InvalidArgument for a label out of range or batch < 1.
  virtual absl::StatusOr<float> TrainStep(const float* params, const float* images,
                                          const int32_t* labels, int batch, float* grads) = 0;

  // Inference (batch-norm running statistics, no dropout).
  virtual absl::StatusOr<EvalResult> Evaluate(const float* params, const float* images,
                                              const int32_t* labels, int batch) = 0;

  // Dropout masks are DropoutKeep(seed, step, node, i); TrainStep uses the current step and
  // then increments it. Starts at 0.
  void set_step(int64_t step) { step_ = step; }
  int64_t step() const { return step_; }

  // Called during TrainStep as backward finishes parameter gradients: [offset, offset + count)
  // of `grads` is final. Every parameter is reported exactly once per step, from the last layer
  // to the first (by ParamGroup: each node's parameters at once; the CPU backend after the
  // node's backward, the CUDA backend once the node's gradients have been copied to the host
  // while the rest of backward runs). Lets the worker push partitions while backward goes on.
  // Empty: not called.
  using GradientReady = std::function<void(int64_t offset, int64_t count)>;
  void set_gradient_ready(GradientReady fn) { gradient_ready_ = std::move(fn); }

  // Called during TrainStep before forward first reads a node's parameters: [offset, offset +
  // count) of `params` (a ParamGroup) must be final when it returns. Lets the worker start the
  // forward pass while the pull that writes the parameters still runs. Returns whether this
  // backend calls it (one that does not reads `params` whole at the step's start). Empty: not
  // called.
  using ParamsNeeded = std::function<void(int64_t offset, int64_t count)>;
  bool set_params_needed(ParamsNeeded fn) {
    params_needed_ = std::move(fn);
    return CallsParamsNeeded();
  }

  // Gradients as binary16, the fp16 push codec's values (round to nearest even: bit for bit what
  // codec::EncodeFp16 makes of the fp32 gradient). Once set non-null (`half` holds
  // num_parameters values and outlives its use), TrainStep writes the gradient to `half`, leaves
  // `grads` unspecified, and GradientReady's ranges are of `half`. A backend with a device
  // encodes before copying, so half the bytes cross the bus and the host encodes nothing.
  // Returns whether this backend does; one that does not (the CPU's) keeps writing `grads`.
  // Null: fp32 gradients again.
  bool set_fp16_gradients(uint16_t* half) {
    fp16_grads_ = WritesFp16Gradients() ? half : nullptr;
    return fp16_grads_ != nullptr;
  }

  // The logits of the last forward pass (batch x num_classes), for tests.
  virtual const float* logits() const = 0;

  // Page-locks [data, data + bytes) while the returned object lives, for arrays every step
  // copies to or from a device (the parameters the pulls fill, the gradient buffer): copies
  // then run at the bus's speed and overlap compute. The memory must outlive the object and
  // must not be pinned twice. A backend without a device returns an object that does nothing.
  // Errors (the driver refused) leave the memory usable, unpinned.
  virtual absl::StatusOr<std::unique_ptr<PinnedHostMemory>> PinHostMemory(void* /*data*/,
                                                                          size_t /*bytes*/) {
    return std::make_unique<PinnedHostMemory>();
  }

  // The batch-norm running statistics evaluation uses, over the batch-norm nodes in node order:
  // each node's channel means, then its variances (Graph::BatchNormStatisticsSize() floats).
  virtual std::vector<float> BatchNormStatistics() const = 0;
  // Replaces them (a model file's); InvalidArgument for the wrong number of values.
  virtual absl::Status SetBatchNormStatistics(const std::vector<float>& stats) = 0;

  // Where the last TrainStep's device copies ran (empty for a backend without a device).
  virtual std::vector<DeviceSpan> LastStepDeviceSpans() const { return {}; }

  const Graph& graph() const { return graph_; }

 protected:
  explicit Network(Graph graph) : graph_(std::move(graph)) {}
  // SetBatchNormStatistics' check: InvalidArgument unless `n` values fit the graph.
  absl::Status CheckStatisticsSize(size_t n) const {
    if (static_cast<int64_t>(n) == graph_.BatchNormStatisticsSize()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("batch-norm statistics: ", n,
                                                   " values for a model with ",
                                                   graph_.BatchNormStatisticsSize()));
  }
  // Whether TrainStep calls params_needed_ (set_params_needed).
  virtual bool CallsParamsNeeded() const { return false; }
  // Whether TrainStep can write binary16 gradients to fp16_grads_ (set_fp16_gradients).
  virtual bool WritesFp16Gradients() const { return false; }

  const Graph graph_;
  int64_t step_ = 0;
  GradientReady gradient_ready_;
  ParamsNeeded params_needed_;
  uint16_t* fp16_grads_ = nullptr;  // set_fp16_gradients; null: fp32 gradients to `grads`
};

}  // namespace r2sp::models

#endif  // R2SP_MODELS_NETWORK_H_
