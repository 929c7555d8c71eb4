// A bounded, uniform sample of a measured quantity (grant latencies, gap ratios, barrier
// release times) for the scheduler's instrumentation: count, mean and maximum of everything
// added, percentiles from a reservoir of at most `capacity` values (Vitter's algorithm R), so
// that it costs O(1) per value and bounded memory however long the job runs.
#ifndef R2SP_SCHEDULER_SAMPLE_STATS_H_
#define R2SP_SCHEDULER_SAMPLE_STATS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace r2sp {

// Not thread-safe (the scheduler's parts call it under SchedulerCore's lock).
class SampleStats {
 public:
  // REQUIRES: capacity >= 1.
  explicit SampleStats(size_t capacity = 65536);

  void Add(double value);

  int64_t count() const { return count_; }
  double mean() const { return count_ == 0 ? 0 : sum_ / static_cast<double>(count_); }
  double max() const { return max_; }
  // The q-quantile (q in [0, 1]) of the sample by nearest rank; 0 when empty. Exact while
  // count() <= capacity.
  double Quantile(double q) const;
  // {"count": N, "mean": .., "p50": .., "p99": .., "max": ..} with every value times `scale`
  // (1000: seconds as milliseconds) and the keys suffixed `unit` ("_ms").
  std::string Json(double scale = 1, const std::string& unit = "") const;

 private:
  const size_t capacity_;
  std::vector<double> sample_;
  int64_t count_ = 0;
  double sum_ = 0;
  double max_ = 0;
  uint64_t rng_ = 0x9E3779B97F4A7C15ull;  // xorshift64: deterministic, no locking
};

}  // namespace r2sp

#endif  // R2SP_SCHEDULER_SAMPLE_STATS_H_
