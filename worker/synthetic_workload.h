// The synthetic workload the core worker runs before real models exist: a model of a given
// size with CNN-like tensor shapes, deterministic initial values, and gradients that are
// either random (bandwidth tests) or "known" (exactly checkable sums in the tests).
#ifndef R2SP_WORKER_SYNTHETIC_WORKLOAD_H_
#define R2SP_WORKER_SYNTHETIC_WORKLOAD_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/scheduler_client.h"
#include "proto/messages.pb.h"
#include "worker/exchange.h"
#include "worker/ps_client.h"
#include "worker/run_log.h"

namespace r2sp {

// `layers` weight tensors splitting total_floats (earlier layers smaller, as in a CNN), each
// followed by a 64-element bias, with names layerK.weight / layerK.bias.
// REQUIRES: total_floats >= 65 * layers, layers >= 1.
std::vector<proto::TensorSpec> SyntheticModel(size_t total_floats, int layers);

// Initial parameters: uniform in [-0.05, 0.05) from `seed`.
void FillInitialParams(uint64_t seed, float* params, size_t n);

// Random gradients in [-1, 1) from `seed`.
void FillRandomGradient(uint64_t seed, float* grad, size_t n);

// The known gradient of worker `rank` at `clock`: element i is (rank + 1) + clock + (i % 4),
// small integers whose fp32 sums are exact in any order.
void FillKnownGradient(int rank, int64_t clock, float* grad, size_t n);

struct SyntheticOptions {
  int rank = 0;
  int iterations = 100;
  bool known_gradients = false;  // else random (generated once)
  uint64_t seed = 1;
  int compute_ms = 0;            // sleep per iteration, standing in for compute
  ExchangeOptions mode;           // the job's sync, staleness and slot coverage
  int log_every = 10;
};

struct SyntheticResult {
  double seconds = 0;
  double push_seconds = 0, pull_seconds = 0;
};

// Runs the synthetic iterations: (compute) -> (r2sp: slot) -> push the gradient -> pull the
// parameters as the mode allows -> (r2sp: release). `scheduler` is used in r2sp; `log` (may be
// null) gets the same per-iteration metrics and timeline spans as real training.
absl::StatusOr<SyntheticResult> RunSynthetic(const SyntheticOptions& options, PsClient* ps,
                                             SchedulerClient* scheduler,
                                             std::vector<float>* params, RunLog* log = nullptr);

}  // namespace r2sp

#endif  // R2SP_WORKER_SYNTHETIC_WORKLOAD_H_
