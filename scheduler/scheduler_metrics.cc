// See scheduler_metrics.h.
#include "scheduler/scheduler_metrics.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace r2sp {
namespace {

// Microseconds since the Unix epoch, or 0 for a time never set.
int64_t UnixMicros(absl::Time t) {
  return t == absl::InfinitePast() ? 0 : absl::ToUnixMicros(t);
}

}  // namespace

void SchedulerMetrics::Registered(absl::Time now, bool rendezvous_done) {
  if (first_register_ == absl::InfinitePast()) first_register_ = now;
  if (rendezvous_done && all_registered_ == absl::InfinitePast()) all_registered_ = now;
}

void SchedulerMetrics::Heartbeat(absl::Time now) {
  if (heartbeats_ == 0) first_heartbeat_ = now;
  last_heartbeat_ = now;
  ++heartbeats_;
}

void SchedulerMetrics::BarrierReleased(absl::Time started, absl::Time now, int waiters) {
  barrier_release_.Add(absl::ToDoubleSeconds(now - started));
  barrier_waiters_ += waiters;
}

void SchedulerMetrics::WorkerRemoved(int rank, absl::Time last_heard, absl::Time now) {
  removals_.push_back({rank, last_heard, now});
}

std::string SchedulerMetrics::Json(const SlotStats& slots) const {
  const double registration =
      all_registered_ == absl::InfinitePast()
          ? -1
          : absl::ToDoubleSeconds(all_registered_ - first_register_);
  const double span = heartbeats_ > 1 ? absl::ToDoubleSeconds(last_heartbeat_ - first_heartbeat_)
                                      : 0;
  std::vector<std::string> dead;
  for (const Removal& r : removals_) {
    dead.push_back(absl::StrCat("{\"rank\": ", r.rank, ", \"last_heard_unix_us\": ",
                                UnixMicros(r.last_heard), ", \"removed_unix_us\": ",
                                UnixMicros(r.removed), "}"));
  }
  return absl::StrCat(
      "{\"first_register_unix_us\": ", UnixMicros(first_register_),
      ", \"all_registered_unix_us\": ", UnixMicros(all_registered_),
      ", \"registration_s\": ", registration, ", \"heartbeats\": ", heartbeats_,
      ", \"heartbeats_per_s\": ", span > 0 ? static_cast<double>(heartbeats_ - 1) / span : 0,
      ", \"barrier_release_ms\": ", barrier_release_.Json(1000, "_ms"),
      ", \"barrier_waiters\": ", barrier_waiters_, ", \"dead_workers\": [",
      absl::StrJoin(dead, ", "), "], \"slots\": ", slots.Json(), "}");
}

}  // namespace r2sp
