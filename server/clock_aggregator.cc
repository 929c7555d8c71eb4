// See clock_aggregator.h.
#include "server/clock_aggregator.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace r2sp {

ClockAggregator::ClockAggregator(size_t num_elements, int num_workers)
    : sum_(num_elements, 0.0f), arrived_(num_workers, false) {}

absl::Status ClockAggregator::CheckArrival(int worker, int64_t clock) const {
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
  return absl::OkStatus();
}

void ClockAggregator::Arrived(int worker, float weight) {
  if (weight > 0.0f) weighted_ = true;
  arrived_[worker] = true;
  ++contributors_;
  ++arrivals_;
}

absl::Status ClockAggregator::Skip(int worker, int64_t clock, float weight) {
  R2SP_RETURN_IF_ERROR(CheckArrival(worker, clock));
  arrived_[worker] = true;
  ++arrivals_;
  if (weight > 0.0f) skipped_weight_ += weight;
  return absl::OkStatus();
}

absl::Status ClockAggregator::Add(int worker, int64_t clock, const float* grad, float weight) {
  R2SP_RETURN_IF_ERROR(CheckArrival(worker, clock));
  float* __restrict out = sum_.data();
  const size_t n = sum_.size();
  if (weight > 0.0f) {
    if (contributors_ == 0) {
      for (size_t i = 0; i < n; ++i) out[i] = weight * grad[i];
    } else {
      for (size_t i = 0; i < n; ++i) out[i] += weight * grad[i];
    }
  } else if (contributors_ == 0) {
    std::memcpy(out, grad, n * sizeof(float));
  } else {
    for (size_t i = 0; i < n; ++i) out[i] += grad[i];
  }
  Arrived(worker, weight);
  return absl::OkStatus();
}

absl::Status ClockAggregator::Add(int worker, int64_t clock, const wire::GradientView& grad,
                                  float weight) {
  if (grad.kind == wire::GradientView::Kind::kDense) return Add(worker, clock, grad.dense, weight);
  R2SP_RETURN_IF_ERROR(CheckArrival(worker, clock));
  float* __restrict out = sum_.data();
  if (contributors_ == 0) std::memset(out, 0, sum_.size() * sizeof(float));
  const float w = weight > 0.0f ? weight : 1.0f;
  if (grad.kind == wire::GradientView::Kind::kSparse) {
    for (size_t j = 0; j < grad.count; ++j) out[grad.ids[j]] += w * grad.values[j];
  } else {
    grad.ForEachChunk([&](size_t begin, size_t length, const float* values) {
      float* __restrict o = out + begin;
      for (size_t i = 0; i < length; ++i) o[i] += w * values[i];
    });
  }
  Arrived(worker, weight);
  return absl::OkStatus();
}

bool ClockAggregator::Complete(const std::vector<bool>& live,
                               const std::vector<int64_t>& joined_at) const {
  if (arrivals_ == 0) return false;
  for (size_t w = 0; w < arrived_.size(); ++w) {
    const bool takes_part = w >= joined_at.size() || clock_ >= joined_at[w];
    if (w < live.size() && live[w] && takes_part && !arrived_[w]) return false;
  }
  return true;
}

void ClockAggregator::AddWorkers(int num_workers) {
  if (num_workers > static_cast<int>(arrived_.size())) arrived_.resize(num_workers, false);
}

void ClockAggregator::Advance() {
  std::fill(arrived_.begin(), arrived_.end(), false);
  contributors_ = 0;
  arrivals_ = 0;
  skipped_weight_ = 0.0f;
  weighted_ = false;
  ++clock_;
}

void ClockAggregator::ResetTo(int64_t clock) {
  Advance();
  clock_ = clock;
}

}  // namespace r2sp
