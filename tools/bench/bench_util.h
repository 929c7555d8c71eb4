// Small helpers for the benchmark programs: warm-up, repetitions, medians, and test data.
#ifndef R2SP_TOOLS_BENCH_BENCH_UTIL_H_
#define R2SP_TOOLS_BENCH_BENCH_UTIL_H_

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <utility>
#include <vector>

namespace r2sp::bench {

// Runs `body` `warmup` times untimed, then `reps` times; returns the median seconds.
inline double MedianSeconds(int warmup, int reps, const std::function<void()>& body) {
  for (int i = 0; i < warmup; ++i) body();
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    body();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// CPU seconds this process has used so far, all threads (user + system).
inline double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         1e-6 * (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

// `body`, appending the CPU seconds the whole process used while it ran to *cpu.
inline std::function<void()> CountingCpu(std::function<void()> body, std::vector<double>* cpu) {
  return [body = std::move(body), cpu] {
    const double before = ProcessCpuSeconds();
    body();
    cpu->push_back(ProcessCpuSeconds() - before);
  };
}

inline double TimeOnce(const std::function<void()>& body) {
  const auto t0 = std::chrono::steady_clock::now();
  body();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Runs every body `warmup` times untimed, then `reps` rounds in which each body runs once,
// starting each round at the next body (so none always follows the same one). Returns the
// seconds per body per round: result[body][round]. Interleaving exposes every body to the same
// moments of a noisy machine, so per-round ratios compare like with like.
inline std::vector<std::vector<double>> InterleavedSeconds(
    int warmup, int reps, const std::vector<std::function<void()>>& bodies) {
  for (int i = 0; i < warmup; ++i) {
    for (const auto& body : bodies) body();
  }
  const size_t n = bodies.size();
  std::vector<std::vector<double>> times(n, std::vector<double>(reps));
  for (int r = 0; r < reps; ++r) {
    for (size_t k = 0; k < n; ++k) {
      const size_t b = (r + k) % n;
      times[b][r] = TimeOnce(bodies[b]);
    }
  }
  return times;
}

// The median over rounds of numerator[r] / denominator[r].
inline double MedianRatio(const std::vector<double>& numerator,
                          const std::vector<double>& denominator) {
  std::vector<double> ratios;
  for (size_t r = 0; r < numerator.size() && r < denominator.size(); ++r) {
    ratios.push_back(numerator[r] / denominator[r]);
  }
  return Median(ratios);
}

// n gradient-like values: normal, sigma 1e-3, the same for every call with the same seed. Top-k's
// sampled threshold needs a spread of magnitudes: a constant gradient would make it fall back to
// exact selection on every push.
inline std::vector<float> GradientLike(size_t n, uint32_t seed = 1) {
  std::vector<float> grads(n);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  for (float& g : grads) g = normal(rng);
  return grads;
}

}  // namespace r2sp::bench

#endif  // R2SP_TOOLS_BENCH_BENCH_UTIL_H_
