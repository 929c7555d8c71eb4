// The synthetic workload the core worker runs before real models exist: a model of a given
// size with CNN-like tensor shapes, deterministic initial values, and gradients that are
// either random (bandwidth tests) or "known" (exactly checkable sums in the tests).
#ifndef R2SP_WORKER_SYNTHETIC_WORKLOAD_H_
#define R2SP_WORKER_SYNTHETIC_WORKLOAD_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "proto/messages.pb.h"

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

}  // namespace r2sp

#endif  // R2SP_WORKER_SYNTHETIC_WORKLOAD_H_
