// Small timing helpers for the benchmark programs: warm-up, repetitions, medians.
#ifndef R2SP_TOOLS_BENCH_BENCH_UTIL_H_
#define R2SP_TOOLS_BENCH_BENCH_UTIL_H_

#include <algorithm>
#include <chrono>
#include <functional>
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

}  // namespace r2sp::bench

#endif  // R2SP_TOOLS_BENCH_BENCH_UTIL_H_
