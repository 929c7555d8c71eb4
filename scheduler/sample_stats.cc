// See sample_stats.h.
#include "scheduler/sample_stats.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace r2sp {

SampleStats::SampleStats(size_t capacity) : capacity_(capacity) { CHECK_GE(capacity, 1u); }

void SampleStats::Add(double value) {
  max_ = count_ == 0 ? value : std::max(max_, value);
  ++count_;
  sum_ += value;
  if (sample_.size() < capacity_) {
    sample_.push_back(value);
    return;
  }
  rng_ ^= rng_ << 13;
  rng_ ^= rng_ >> 7;
  rng_ ^= rng_ << 17;
  const uint64_t slot = rng_ % static_cast<uint64_t>(count_);  // keep with p = capacity/count
  if (slot < capacity_) sample_[slot] = value;
}

double SampleStats::Quantile(double q) const {
  if (sample_.empty()) return 0;
  std::vector<double> sorted = sample_;
  const size_t n = sorted.size();
  const double rank = std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(n));
  const size_t k = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  std::nth_element(sorted.begin(), sorted.begin() + k, sorted.end());
  return sorted[k];
}

std::string SampleStats::Json(double scale, const std::string& unit) const {
  return absl::StrCat("{\"count\": ", count_, ", \"mean", unit, "\": ", mean() * scale,
                      ", \"p50", unit, "\": ", Quantile(0.5) * scale, ", \"p99", unit,
                      "\": ", Quantile(0.99) * scale, ", \"max", unit, "\": ", max_ * scale, "}");
}

}  // namespace r2sp
