// SlotStats: grant latency from the due time, the achieved gap against the plan (all grants and
// the gap-bound ones), and holders counted from grants and releases (an overlap shows).
#include "scheduler/slot_stats.h"

#include "gtest/gtest.h"

namespace r2sp {
namespace {

const absl::Time t0 = absl::UnixEpoch();
absl::Time At(int ms) { return t0 + absl::Milliseconds(ms); }

TEST(SlotStatsTest, LatencyFromDueAndGapAgainstPlan) {
  SlotStats s;
  const absl::Duration gap = absl::Milliseconds(50);
  s.Granted(0, At(0), absl::InfinitePast(), gap, 1, At(0));
  s.Released(0);
  s.Granted(1, At(50), At(0), gap, 1, At(52));  // gap-bound: due when the gap passed
  s.Released(1);
  s.Granted(0, At(200), At(52), gap, 1, At(200));  // due at its request, long after the gap
  EXPECT_EQ(s.grant_latency().count(), 3);
  EXPECT_NEAR(s.grant_latency().max(), 0.002, 1e-12);
  ASSERT_EQ(s.gap_bound_ratio().count(), 1);
  EXPECT_NEAR(s.gap_bound_ratio().max(), 52.0 / 50, 1e-12);
  EXPECT_EQ(s.max_holders(), 1);
  EXPECT_EQ(s.grants_beyond_width(), 0);
  EXPECT_EQ(s.Json(),
            "{\"grant_latency_ms\": {\"count\": 3, \"mean_ms\": 0.666667, \"p50_ms\": 0, "
            "\"p99_ms\": 2, \"max_ms\": 2}, \"gap_planned_mean_ms\": 50, "
            "\"gap_achieved_mean_ms\": 100, \"gap_bound_ratio\": {\"count\": 1, \"mean\": 1.04, "
            "\"p50\": 1.04, \"p99\": 1.04, \"max\": 1.04}, \"max_holders\": 1, "
            "\"grants_beyond_width\": 0}");
}

TEST(SlotStatsTest, AGrantWhileTheSlotIsFullIsCounted) {
  SlotStats s;
  s.Granted(0, At(0), absl::InfinitePast(), absl::ZeroDuration(), 1, At(0));
  s.Granted(1, At(1), At(0), absl::ZeroDuration(), 1, At(1));  // 0 still holds it
  EXPECT_EQ(s.max_holders(), 2);
  EXPECT_EQ(s.grants_beyond_width(), 1);
  s.Released(0);
  s.Released(7);  // held nothing: no effect
  s.Granted(2, At(2), At(1), absl::ZeroDuration(), 2, At(2));  // width 2: 1 and 2 hold it
  EXPECT_EQ(s.max_holders(), 2);
  EXPECT_EQ(s.grants_beyond_width(), 1);
}

}  // namespace
}  // namespace r2sp
