// See slot_stats.h.
#include "scheduler/slot_stats.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace r2sp {

void SlotStats::Granted(int rank, absl::Time due, absl::Time previous, absl::Duration gap,
                        int width, absl::Time now) {
  grant_latency_.Add(std::max(0.0, absl::ToDoubleSeconds(now - due)));
  if (previous != absl::InfinitePast()) {
    const double achieved = absl::ToDoubleSeconds(now - previous);
    const double planned = absl::ToDoubleSeconds(gap);
    planned_sum_s_ += planned;
    achieved_sum_s_ += achieved;
    ++intervals_;
    if (planned > 0 && due == previous + gap) gap_bound_ratio_.Add(achieved / planned);
  }
  if (static_cast<int>(holders_.size()) >= width) ++beyond_width_;
  holders_.insert(rank);
  max_holders_ = std::max(max_holders_, static_cast<int>(holders_.size()));
}

void SlotStats::Released(int rank) { holders_.erase(rank); }

std::string SlotStats::Json() const {
  const double n = intervals_ > 0 ? static_cast<double>(intervals_) : 1;
  return absl::StrCat("{\"grant_latency_ms\": ", grant_latency_.Json(1000, "_ms"),
                      ", \"gap_planned_mean_ms\": ", planned_sum_s_ / n * 1000,
                      ", \"gap_achieved_mean_ms\": ", achieved_sum_s_ / n * 1000,
                      ", \"gap_bound_ratio\": ", gap_bound_ratio_.Json(),
                      ", \"max_holders\": ", max_holders_,
                      ", \"grants_beyond_width\": ", beyond_width_, "}");
}

}  // namespace r2sp
