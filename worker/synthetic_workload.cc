// See synthetic_workload.h.
#include "worker/synthetic_workload.h"

#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
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
  const uint64_t model_bytes = params->size() * sizeof(float);
  for (int clock = 0; clock < options.iterations; ++clock) {
    const absl::Time tc = absl::Now();
    if (options.compute_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(options.compute_ms));
    }
    if (options.known_gradients) FillKnownGradient(options.rank, clock, grads.data(), grads.size());
    const absl::Time tw = absl::Now();
    IterationMetrics m;
    m.clock = clock;
    m.compute_seconds = absl::ToDoubleSeconds(tw - tc);
    if (options.sync == proto::R2SP) {
      absl::StatusOr<proto::SlotGrant> grant =
          scheduler->RequestSlot(0, options.compute_ms / 1000.0);
      if (!grant.ok()) {
        return absl::Status(grant.status().code(), absl::StrCat("slot: ", grant.status().message()));
      }
      m.gap_seconds = grant->gap_seconds();
    }
    const absl::Time t0 = absl::Now();
    m.wait_seconds = absl::ToDoubleSeconds(t0 - tw);
    absl::Status status = ps->Push(grads.data(), clock).Wait();
    if (!status.ok()) return absl::Status(status.code(), absl::StrCat("push: ", status.message()));
    const absl::Time t1 = absl::Now();
    const int64_t min_version = options.sync == proto::BSP ? clock + 1 : 0;
    const int64_t min_clock =
        options.sync == proto::SSP ? std::max<int64_t>(0, clock + 1 - options.staleness) : 0;
    Ticket pull = ps->Pull(params->data(), min_version, min_clock);
    status = pull.Wait();
    if (!status.ok()) return absl::Status(status.code(), absl::StrCat("pull: ", status.message()));
    if (options.sync == proto::R2SP) scheduler->ReleaseSlot(/*leaving=*/clock + 1 == options.iterations);
    const absl::Time t2 = absl::Now();
    if (log != nullptr) {
      m.push_seconds = absl::ToDoubleSeconds(t1 - t0);
      m.pull_seconds = absl::ToDoubleSeconds(t2 - t1);
      m.wait_seconds += pull.waited_seconds();
      m.push_bytes = m.pull_bytes = model_bytes;
      log->Span("compute", tc, tw);
      if (options.sync == proto::R2SP) log->Span("wait", tw, t0);
      log->Span("push", t0, t1);
      log->Span("pull", t1, t2);
      log->Metrics(m);
    }
    push_time += t1 - t0;
    pull_time += t2 - t1;
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
