// See synthetic_workload.h.
#include "worker/synthetic_workload.h"

#include <chrono>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace r2sp {

std::vector<proto::TensorSpec> SyntheticModel(size_t total_floats, int layers) {
  CHECK_GE(layers, 1);
  constexpr size_t kBias = 64;
  CHECK_GE(total_floats, (kBias + 1) * layers);
  // Layer k gets weight share (k+1): later layers are bigger, like a CNN's dense head.
  const size_t weights = total_floats - kBias * layers;
  const size_t shares = static_cast<size_t>(layers) * (layers + 1) / 2;
  std::vector<proto::TensorSpec> model;
  size_t given = 0;
  for (int k = 0; k < layers; ++k) {
    size_t n = weights / shares * (k + 1);
    if (k == layers - 1) n = weights - given;  // the remainder goes to the last layer
    n = std::max<size_t>(n, 1);
    given += n;
    proto::TensorSpec w;
    w.set_name(absl::StrCat("layer", k, ".weight"));
    w.set_num_elements(n);
    model.push_back(w);
    proto::TensorSpec b;
    b.set_name(absl::StrCat("layer", k, ".bias"));
    b.set_num_elements(kBias);
    model.push_back(b);
  }
  return model;
}

void FillInitialParams(uint64_t seed, float* params, size_t n) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-0.05f, 0.05f);
  for (size_t i = 0; i < n; ++i) params[i] = dist(rng);
}


void FillKnownGradient(int rank, int64_t clock, float* grad, size_t n) {
  const float base = static_cast<float>(rank + 1 + clock);
  for (size_t i = 0; i < n; ++i) grad[i] = base + static_cast<float>(i % 4);
}

namespace {

// Random gradients in [-1, 1) from `seed`.
void FillRandomGradient(uint64_t seed, float* grad, size_t n) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (size_t i = 0; i < n; ++i) grad[i] = dist(rng);
}

}  // namespace

SyntheticWorkload::SyntheticWorkload(const SyntheticOptions& options, size_t num_parameters)
    : options_(options), gradient_(num_parameters) {
  if (!options.known_gradients) {
    FillRandomGradient(options.seed + 1000 + options.rank, gradient_.data(), gradient_.size());
  }
}

absl::StatusOr<ComputedStep> SyntheticWorkload::ComputeGradient(int64_t clock, int /*batch*/,
                                                                const float* /*params*/) {
  if (options_.known_gradients) {
    FillKnownGradient(options_.rank, clock, gradient_.data(), gradient_.size());
  }
  // Forward (a third of the time), then backward: with callbacks, slices of the parameters
  // needed from the first to the last, then of the gradient ready from the last to the first.
  const int64_t n = static_cast<int64_t>(gradient_.size());
  const auto third = std::chrono::microseconds(options_.compute_ms * 1000 / 3);
  const auto backward = std::chrono::microseconds(options_.compute_ms * 1000) - third;
  if (!params_needed_) {
    std::this_thread::sleep_for(third);
  } else {
    for (int k = 0; k < kSlices; ++k) {
      const int64_t begin = n * k / kSlices, end = n * (k + 1) / kSlices;
      if (end > begin) params_needed_(begin, end - begin);
      std::this_thread::sleep_for(third / kSlices);
    }
  }
  if (!gradient_ready_) {
    std::this_thread::sleep_for(backward);
  } else {
    for (int k = kSlices - 1; k >= 0; --k) {
      std::this_thread::sleep_for(backward / kSlices);
      const int64_t begin = n * k / kSlices, end = n * (k + 1) / kSlices;
      if (end > begin) gradient_ready_(gradient_.data(), begin, end - begin);
    }
  }
  ComputedStep step;
  step.grads = gradient_.data();
  return step;
}

}  // namespace r2sp
