// A real network trained on this worker's shard of a data set, as a Workload: batches from the
// Batcher (fixed ones per epoch, or wrapping ones of the size the scheduler tunes), the
// gradient from the backend (oneDNN or CUDA), and the test set evaluated after every epoch on
// the worker that evaluates.
#ifndef R2SP_WORKER_MODEL_WORKLOAD_H_
#define R2SP_WORKER_MODEL_WORKLOAD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "models/data/batcher.h"
#include "models/data/dataset.h"
#include "common/host_array.h"
#include "models/network.h"
#include "worker/host_gradient.h"
#include "worker/workload.h"

namespace r2sp {

struct ModelWorkloadOptions {
  int rank = 0;
  // Batches wrap around the shard instead of ending with the epoch (hetero batching: sizes
  // change, and an epoch is the data set in global batches).
  bool wrapping_batches = false;
  int largest_batch = 64;  // REQUIRES: >= 1; asked-for batches are clamped to [1, this]
  // Asked before each evaluation (after every epoch, and mid-epoch with --eval_every): whether
  // this worker evaluates the test set now (evaluator_role.h). Empty: it never does.
  std::function<bool()> evaluates;
  int eval_batch = 1000;
  // Called after each evaluation batch (the worker counts it as progress, so a long evaluation
  // is not taken for a hang by the scheduler's --progress_timeout_s). Empty: nothing.
  std::function<void()> evaluation_progress;
  // After each evaluation, write the model as evaluated (parameters, batch-norm
  // statistics, step, accuracy) to model_dir (models/model_file.h), keeping the newest
  // keep_models files. Empty: no model files.
  std::string model_dir;
  int keep_models = 3;
  std::string data;  // the data set's name, recorded in the model files
  // Ask the backend for binary16 gradients (the fp16 push codec's values): a GPU encodes them
  // before copying them out, so half the bytes cross the bus. A backend that cannot (the CPU's)
  // gives fp32, which the push encodes as before.
  bool fp16_gradients = false;
};

// The data set `name` from `dir` (empty: Debian's copy for fashion-mnist, else an error).
absl::StatusOr<models::TrainTest> LoadWorkerData(const std::string& name, const std::string& dir);

// Accuracy and summed loss of `net` at `params` on all of `data`, `eval_batch` samples at a
// time (training's evaluation, and worker --eval_only's); `each_batch`, if set, is called after
// every batch.
absl::StatusOr<models::EvalResult> EvaluateDataset(
    models::Network* net, const models::Dataset& data, const float* params, int eval_batch,
    const std::function<void()>& each_batch = nullptr);

// Borrowed pointers outlive the workload; `test` may be null when nothing evaluates.
class ModelWorkload : public Workload {
 public:
  ModelWorkload(const ModelWorkloadOptions& options, models::Network* net,
                models::Batcher* batcher, const models::Dataset* test);
  ~ModelWorkload() override;  // the network writes fp32 gradients again

  void StartEpoch(int epoch, int64_t steps) override;
  void SkipSteps(int64_t steps, int batch) override;
  bool set_params_needed(ParamsNeeded fn) override {
    return net_->set_params_needed(std::move(fn));
  }
  void set_gradient_ready(GradientReady fn) override;
  absl::StatusOr<ComputedStep> ComputeGradient(int64_t clock, int batch,
                                               const float* params) override;
  bool EvaluatesAfterEpoch() const override {
    return test_ != nullptr && options_.evaluates && options_.evaluates();
  }
  absl::StatusOr<std::optional<TestEvaluation>> EvaluateTest(const float* params) override;

 private:
  // The model file of this evaluation (options_.model_dir); a failure is logged, not fatal.
  void ExportModel(const float* params, const TestEvaluation& evaluation);

  const ModelWorkloadOptions options_;
  models::Network* const net_;
  models::Batcher* const batcher_;
  const models::Dataset* const test_;
  std::vector<float> images_;
  std::vector<int32_t> labels_;
  HostArray grads_;  // page-aligned: pinned for GPU copies
  // With options_.fp16_gradients, when the backend writes them (else empty): the gradient as
  // binary16.
  std::vector<uint16_t, PageAlignedAllocator<uint16_t>> half_grads_;
  // The one the device writes (half_grads_ if set, else grads_), page-locked. After both
  // arrays: unpinned first.
  std::unique_ptr<models::PinnedHostMemory> grads_pin_;
  // What the pushes read: grads_, or half_grads_.
  HostGradient Gradient() const;
  int epoch_ = 0;            // the epoch being trained (0-based)
  int64_t steps_done_ = 0;   // global steps computed so far (the last clock + 1)
};

}  // namespace r2sp

#endif  // R2SP_WORKER_MODEL_WORKLOAD_H_
