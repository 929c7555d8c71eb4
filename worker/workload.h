// What the worker trains, seen by the training loop (training_loop.h): a real network on its
// shard of a data set (model_workload.h) or the synthetic model (synthetic_workload.h).
#ifndef R2SP_WORKER_WORKLOAD_H_
#define R2SP_WORKER_WORKLOAD_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/host_gradient.h"

namespace r2sp {

// Part of a step that ran on a device (a copy), in seconds from the step's start.
struct DeviceStepSpan {
  std::string name;
  double begin_seconds = 0, end_seconds = 0;
};

struct ComputedStep {
  int samples = 0;    // the batch actually computed (0: the workload has no samples)
  double loss = 0.0;  // on that batch, before the update
  // The gradient (the model's size), owned by the workload; valid until the next call. fp32,
  // or binary16 when the workload's device encoded it for the fp16 push codec.
  HostGradient grads;
  std::vector<DeviceStepSpan> device_spans;  // for the timeline; empty without a device
  // The script skipped this step (an inf or NaN in its gradient): its pushes carry nothing
  // (PsClient::SkipPushesOf) and the servers apply nothing of this worker's for it.
  bool skip = false;
  // When the caller's compute of this step began, if before the run handed the step out (a
  // script that takes its step only at step(), its batch loaded ahead); InfinitePast: when it
  // was handed out. The step's compute time (what hetero batching tunes by) counts from here.
  absl::Time began = absl::InfinitePast();
};

struct TestEvaluation {
  double accuracy = 0.0;
  double loss = 0.0;  // mean per sample
};

// Backward has finished [offset, offset + count) of the gradient `grads` (the model's size, the
// buffer ComputeGradient will return): those values are final. For overlapping communication
// with backward (worker/bucket_pusher.h).
using GradientReady = std::function<void(HostGradient grads, int64_t offset, int64_t count)>;

// The next forward is about to read [offset, offset + count) of the parameters: blocks until
// those values are final. For overlapping the pull with the next forward (Exchanger, --overlap).
using ParamsNeeded = std::function<void(int64_t offset, int64_t count)>;

// Called from the training thread only.
class Workload {
 public:
  virtual ~Workload() = default;

  // Once set, every ComputeGradient reports each gradient value exactly once through `fn`
  // before it returns (as backward produces them where the workload can, else all at the end).
  virtual void set_gradient_ready(GradientReady fn) = 0;

  // Once set (non-empty), every ComputeGradient calls `fn` for each part of `params` before it
  // first reads it, covering every parameter, in the order forward reads them. Returns whether
  // this workload does so; false: it reads the parameters before saying, so they must be final
  // when ComputeGradient starts.
  virtual bool set_params_needed(ParamsNeeded /*fn*/) { return false; }

  // Before each epoch's first step (epochs count from 0), with the steps the run trains in it
  // from its start (fewer than planned in the run's last epoch when --max_steps ends it).
  virtual void StartEpoch(int epoch, int64_t steps) = 0;
  // After StartEpoch, when a resumed job starts mid-epoch: passes over the data of `steps`
  // iterations of `batch` samples.
  virtual void SkipSteps(int64_t /*steps*/, int /*batch*/) {}

  // The gradient of iteration `clock` on about `batch` samples at `params` (the model's size).
  virtual absl::StatusOr<ComputedStep> ComputeGradient(int64_t clock, int batch,
                                                       const float* params) = 0;

  // Whether EvaluateTest runs after every epoch (on this worker).
  virtual bool EvaluatesAfterEpoch() const { return false; }
  // The test set's evaluation at `params`, or nullopt when the workload has none to give this
  // time; then nothing is logged.
  virtual absl::StatusOr<std::optional<TestEvaluation>> EvaluateTest(const float* /*params*/) {
    return absl::UnimplementedError("this workload has no test set");
  }
};

}  // namespace r2sp

#endif  // R2SP_WORKER_WORKLOAD_H_
