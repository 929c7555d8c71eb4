// The synthetic workload, for transport tests and benchmarks: a model of a given size with
// CNN-like tensor shapes, deterministic initial values, and gradients that are either random
// (bandwidth tests) or "known" (exactly checkable sums in the tests).
#ifndef R2SP_WORKER_SYNTHETIC_WORKLOAD_H_
#define R2SP_WORKER_SYNTHETIC_WORKLOAD_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/messages.pb.h"
#include "worker/workload.h"

namespace r2sp {

// `layers` weight tensors splitting total_floats (earlier layers smaller, as in a CNN), each
// followed by a 64-element bias, with names layerK.weight / layerK.bias.
// REQUIRES: total_floats >= 65 * layers, layers >= 1.
std::vector<proto::TensorSpec> SyntheticModel(size_t total_floats, int layers);

// Initial parameters: uniform in [-0.05, 0.05) from `seed`.
void FillInitialParams(uint64_t seed, float* params, size_t n);

// The known gradient of worker `rank` at `clock`: element i is (rank + 1) + clock + (i % 4),
// small integers whose fp32 sums are exact in any order.
void FillKnownGradient(int rank, int64_t clock, float* grad, size_t n);

struct SyntheticOptions {
  int rank = 0;
  bool known_gradients = false;  // else random (generated once)
  uint64_t seed = 1;
  int compute_ms = 0;            // sleep per iteration, standing in for compute
};

// The synthetic model as a Workload: each iteration sleeps compute_ms, then gives the known or
// the random gradient; it has no samples and no test set. The sleep stands for forward (a
// third of it) and backward (the rest). With a params-needed callback, forward asks for the
// parameters in kSlices equal slices from the start to the end, one before each slice of its
// sleep; with a gradient-ready callback, backward reports the gradient ready from the end to the
// start in kSlices equal slices, one after each slice of its sleep.
class SyntheticWorkload : public Workload {
 public:
  SyntheticWorkload(const SyntheticOptions& options, size_t num_parameters);

  static constexpr int kSlices = 16;

  void StartEpoch(int /*epoch*/, int64_t /*steps*/) override {}
  void set_gradient_ready(GradientReady fn) override { gradient_ready_ = std::move(fn); }
  bool set_params_needed(ParamsNeeded fn) override {
    params_needed_ = std::move(fn);
    return true;
  }
  absl::StatusOr<ComputedStep> ComputeGradient(int64_t clock, int batch,
                                               const float* params) override;

 private:
  const SyntheticOptions options_;
  std::vector<float> gradient_;  // random ones are generated once
  GradientReady gradient_ready_;
  ParamsNeeded params_needed_;
};

}  // namespace r2sp

#endif  // R2SP_WORKER_SYNTHETIC_WORKLOAD_H_
