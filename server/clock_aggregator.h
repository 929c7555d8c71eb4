// BSP aggregation for one partition: sums the gradients of one clock until every live worker
// has contributed, then hands the sum to the optimizer with scale 1/contributors.
#ifndef R2SP_SERVER_CLOCK_AGGREGATOR_H_
#define R2SP_SERVER_CLOCK_AGGREGATOR_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/wire/gradient_view.h"

namespace r2sp {

// Not thread-safe; owned by the server's I/O thread.
class ClockAggregator {
 public:
  ClockAggregator(size_t num_elements, int num_workers);

  // Adds `worker`'s gradient for `clock`, multiplied by `weight` if it is > 0 (weighted
  // gradients are summed as they are; unweighted ones are averaged: see scale()). Errors
  // (nothing is added): clock other than the one being aggregated (FailedPrecondition), a
  // second gradient from the same worker for this clock (AlreadyExists), a worker rank out of
  // range (InvalidArgument).
  absl::Status Add(int worker, int64_t clock, const float* grad, float weight = 0.0f);
  // The same for a gradient of any kind (sparse ones are added where they have values).
  absl::Status Add(int worker, int64_t clock, const wire::GradientView& grad, float weight = 0.0f);

  // `worker` skipped `clock` (proto PushInfo.skip, weighing `weight` as its gradient would):
  // it has arrived and adds nothing. Errors as Add's.
  absl::Status Skip(int worker, int64_t clock, float weight = 0.0f);

  // The factor to apply sum() with: 1 for weighted gradients (their weights already make the
  // global-batch average; 1 / the weights that came when a worker skipped), else
  // 1 / contributors. REQUIRES: contributors() > 0.
  float scale() const {
    if (!weighted_) return 1.0f / contributors_;
    return skipped_weight_ > 0.0f ? 1.0f / (1.0f - skipped_weight_) : 1.0f;
  }

  // True when at least one gradient or skip arrived and every worker w with live[w] that takes
  // part in this clock (clock() >= joined_at[w]; a worker past the end of joined_at always
  // does) has. With no gradient (contributors() == 0: all skipped) the clock has no update.
  bool Complete(const std::vector<bool>& live, const std::vector<int64_t>& joined_at = {}) const;

  // Workers joined: ranks up to num_workers - 1 may contribute (never fewer than now).
  void AddWorkers(int num_workers);

  int contributors() const { return contributors_; }
  const float* sum() const { return sum_.data(); }
  int64_t clock() const { return clock_; }

  // Clears the sum and moves on to `clock() + 1`.
  void Advance();
  // Clears the sum and starts aggregating `clock` (a restored checkpoint's).
  void ResetTo(int64_t clock);

 private:
  absl::Status CheckArrival(int worker, int64_t clock) const;
  void Arrived(int worker, float weight);

  std::vector<float> sum_;
  std::vector<bool> arrived_;
  int contributors_ = 0;   // gradients added
  int arrivals_ = 0;       // gradients and skips
  float skipped_weight_ = 0.0f;
  bool weighted_ = false;
  int64_t clock_ = 0;
};

}  // namespace r2sp

#endif  // R2SP_SERVER_CLOCK_AGGREGATOR_H_
