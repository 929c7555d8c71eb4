// The r2sp slot's instrumentation, fed by SlotCoordinator on the scheduler's clock:
//  - grant latency: from when a grant was due (its worker had asked, the slot had room, and
//    the planned gap since the previous grant had passed) to the grant;
//  - the achieved gap between consecutive grants against the planned gap, over every grant
//    and over the gap-bound ones (due when the gap passed: the others waited for a request or
//    a release, so their spacing says how the workers ran, not how well the gap was kept);
//  - the holders at once, counted from grants and releases alone, independently of the
//    planner's own check: with width 1 it must never exceed 1 (pushes never collide).
#ifndef R2SP_SCHEDULER_SLOT_STATS_H_
#define R2SP_SCHEDULER_SLOT_STATS_H_

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "scheduler/sample_stats.h"

namespace r2sp {

// Not thread-safe (SlotCoordinator calls it under SchedulerCore's lock).
class SlotStats {
 public:
  // A grant to `rank` at `now`, which was due at `due`; `previous`: the grant before it
  // (InfinitePast for the first); `gap`, `width`: those in force.
  void Granted(int rank, absl::Time due, absl::Time previous, absl::Duration gap, int width,
               absl::Time now);
  // `rank` gave its slot back, or left the ring holding it (no-op if it held none).
  void Released(int rank);

  const SampleStats& grant_latency() const { return grant_latency_; }  // seconds
  const SampleStats& gap_bound_ratio() const { return gap_bound_ratio_; }  // achieved / planned
  int max_holders() const { return max_holders_; }
  // Grants made while as many as the width in force held the slot already.
  int64_t grants_beyond_width() const { return beyond_width_; }
  // {"grant_latency_ms": .., "gap_planned_mean_ms", "gap_achieved_mean_ms",
  //  "gap_bound_ratio": .., "max_holders", "grants_beyond_width"}.
  std::string Json() const;

 private:
  SampleStats grant_latency_;
  SampleStats gap_bound_ratio_;
  double planned_sum_s_ = 0, achieved_sum_s_ = 0;
  int64_t intervals_ = 0;
  absl::flat_hash_set<int> holders_;
  int max_holders_ = 0;
  int64_t beyond_width_ = 0;
};

}  // namespace r2sp

#endif  // R2SP_SCHEDULER_SLOT_STATS_H_
