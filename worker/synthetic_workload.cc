// See synthetic_workload.h.
#include "worker/synthetic_workload.h"

#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "glog/logging.h"
#include "worker/exchange.h"

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

void FillRandomGradient(uint64_t seed, float* grad, size_t n) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (size_t i = 0; i < n; ++i) grad[i] = dist(rng);
}

void FillKnownGradient(int rank, int64_t clock, float* grad, size_t n) {
  const float base = static_cast<float>(rank + 1 + clock);
  for (size_t i = 0; i < n; ++i) grad[i] = base + static_cast<float>(i % 4);
}

absl::StatusOr<SyntheticResult> RunSynthetic(const SyntheticOptions& options, PsClient* ps,
                                             SchedulerClient* scheduler,
                                             std::vector<float>* params, RunLog* log) {
  std::vector<float> grads(params->size());
  if (!options.known_gradients) {
    FillRandomGradient(options.seed + 1000 + options.rank, grads.data(), grads.size());
  }
  SyntheticResult result;
  const absl::Time start = absl::Now();
  absl::Duration push_time, pull_time;
  for (int clock = 0; clock < options.iterations; ++clock) {
    const absl::Time tc = absl::Now();
    if (options.compute_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(options.compute_ms));
    }
    if (options.known_gradients) FillKnownGradient(options.rank, clock, grads.data(), grads.size());
    const absl::Time computed = absl::Now();
    IterationMetrics m;
    m.clock = clock;
    m.compute_seconds = absl::ToDoubleSeconds(computed - tc);
    if (log != nullptr) log->Span("compute", tc, computed);
    absl::StatusOr<int> exchanged =
        Exchange(options.mode, ps, scheduler, grads.data(), params->data(), /*scale=*/0.0f,
                 clock + 1 == options.iterations, computed, &m, log);
    if (!exchanged.ok()) return exchanged.status();
    if (log != nullptr) log->Metrics(m);
    push_time += absl::Seconds(m.push_seconds);
    pull_time += absl::Seconds(m.pull_seconds);
    if (options.log_every > 0 && (clock + 1) % options.log_every == 0) {
      const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
      std::printf("worker %d: iteration %d/%d  %.1f it/s  push %.2f ms  pull %.2f ms\n",
                  options.rank, clock + 1, options.iterations, (clock + 1) / seconds,
                  absl::ToDoubleMilliseconds(push_time) / (clock + 1),
                  absl::ToDoubleMilliseconds(pull_time) / (clock + 1));
      std::fflush(stdout);
    }
  }
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  result.push_seconds = absl::ToDoubleSeconds(push_time);
  result.pull_seconds = absl::ToDoubleSeconds(pull_time);
  return result;
}

}  // namespace r2sp
