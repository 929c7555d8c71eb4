// SchedulerMetrics: registration span, heartbeat rate, barrier release times and dead workers'
// removals, as the stats JSON's "scale" object.
#include "scheduler/scheduler_metrics.h"

#include "gtest/gtest.h"

namespace r2sp {
namespace {

TEST(SchedulerMetricsTest, TheScaleObject) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  SchedulerMetrics m;
  m.Registered(t0, false);
  m.Registered(t0 + absl::Seconds(1), false);
  m.Registered(t0 + absl::Milliseconds(2500), true);
  m.Registered(t0 + absl::Seconds(9), true);  // a joiner later: the rendezvous stays
  for (int i = 0; i <= 10; ++i) m.Heartbeat(t0 + absl::Milliseconds(100 * i));  // 10/s
  m.BarrierReleased(t0, t0 + absl::Milliseconds(3), 8);
  m.WorkerRemoved(5, t0 + absl::Seconds(2), t0 + absl::Seconds(5));
  SlotStats slots;
  EXPECT_EQ(m.heartbeats(), 11);
  EXPECT_EQ(m.Json(slots),
            "{\"first_register_unix_us\": 1000000000, \"all_registered_unix_us\": 1002500000, "
            "\"registration_s\": 2.5, \"heartbeats\": 11, \"heartbeats_per_s\": 10, "
            "\"barrier_release_ms\": {\"count\": 1, \"mean_ms\": 3, \"p50_ms\": 3, "
            "\"p99_ms\": 3, \"max_ms\": 3}, \"barrier_waiters\": 8, \"dead_workers\": "
            "[{\"rank\": 5, \"last_heard_unix_us\": 1002000000, \"removed_unix_us\": "
            "1005000000}], \"slots\": " + slots.Json() + "}");
}

TEST(SchedulerMetricsTest, BeforeTheRendezvousRegistrationIsUnknown) {
  SchedulerMetrics m;
  m.Registered(absl::FromUnixSeconds(1), false);
  const std::string json = m.Json(SlotStats());
  EXPECT_NE(json.find("\"all_registered_unix_us\": 0, \"registration_s\": -1,"),
            std::string::npos) << json;
}

}  // namespace
}  // namespace r2sp
