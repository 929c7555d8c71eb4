// See clock_aggregator.h.
#include "server/clock_aggregator.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace r2sp {

ClockAggregator::ClockAggregator(size_t num_elements, int num_workers)
    : sum_(num_elements, 0.0f), arrived_(num_workers, false) {}

absl::Status ClockAggregator::Add(int worker, int64_t clock, const float* grad, float weight) {
  if (worker < 0 || worker >= static_cast<int>(arrived_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("worker rank ", worker, " out of range"));
  }
  if (clock != clock_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "gradient for clock ", clock, " but the partition is aggregating clock ", clock_));
  }
  if (arrived_[worker]) {
    return absl::AlreadyExistsError(
        absl::StrCat("worker ", worker, " already pushed clock ", clock));
  }
  float* __restrict out = sum_.data();
  const size_t n = sum_.size();
  if (weight > 0.0f) {
    if (contributors_ == 0) {
      for (size_t i = 0; i < n; ++i) out[i] = weight * grad[i];
    } else {
      for (size_t i = 0; i < n; ++i) out[i] += weight * grad[i];
    }
    weighted_ = true;
  } else if (contributors_ == 0) {
    std::memcpy(out, grad, n * sizeof(float));
  } else {
    for (size_t i = 0; i < n; ++i) out[i] += grad[i];
  }
  arrived_[worker] = true;
  ++contributors_;
  return absl::OkStatus();
}

bool ClockAggregator::Complete(const std::vector<bool>& live) const {
  if (contributors_ == 0) return false;
  for (size_t w = 0; w < arrived_.size(); ++w) {
    if (w < live.size() && live[w] && !arrived_[w]) return false;
  }
  return true;
}

void ClockAggregator::Advance() {
  std::fill(arrived_.begin(), arrived_.end(), false);
  contributors_ = 0;
  weighted_ = false;
  ++clock_;
}

}  // namespace r2sp
