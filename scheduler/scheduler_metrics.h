// What the scheduler measures of itself for the scale figures
// (docs/BENCHMARKS.md#many-workers-on-one-scheduler), cheap enough to stay on: when the first node
// registered and when the last did (the rendezvous), heartbeats handled and their rate, how long
// releasing a barrier takes (from the start of handling the event that completed it to every
// waiter's reply queued), and each dead worker's removal (when it was last heard, when it left the
// ring). With the r2sp slot's SlotStats they go into the stats JSON as "scale" (Json). All on the
// scheduler's clock.
#ifndef R2SP_SCHEDULER_SCHEDULER_METRICS_H_
#define R2SP_SCHEDULER_SCHEDULER_METRICS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "scheduler/sample_stats.h"
#include "scheduler/slot_stats.h"

namespace r2sp {

// Not thread-safe (SchedulerCore calls it under its lock).
class SchedulerMetrics {
 public:
  // A REGISTER handled at `now`; `rendezvous_done`: every expected node has registered now.
  void Registered(absl::Time now, bool rendezvous_done);
  void Heartbeat(absl::Time now);
  // Barriers completed by an event handled from `started` to `now`, releasing `waiters`.
  void BarrierReleased(absl::Time started, absl::Time now, int waiters);
  // Worker `rank`, last heard at `last_heard`, declared dead and out of the ring at `now`.
  void WorkerRemoved(int rank, absl::Time last_heard, absl::Time now);

  int64_t heartbeats() const { return heartbeats_; }
  const SampleStats& barrier_release() const { return barrier_release_; }  // seconds
  // {"first_register_unix_us", "all_registered_unix_us", "registration_s", "heartbeats",
  //  "heartbeats_per_s", "barrier_release_ms": {..}, "dead_workers": [{"rank",
  //  "last_heard_unix_us", "removed_unix_us"}], "slots": SlotStats::Json()}.
  std::string Json(const SlotStats& slots) const;

 private:
  struct Removal {
    int rank;
    absl::Time last_heard, removed;
  };
  absl::Time first_register_ = absl::InfinitePast();
  absl::Time all_registered_ = absl::InfinitePast();
  int64_t heartbeats_ = 0;
  absl::Time first_heartbeat_, last_heartbeat_;
  SampleStats barrier_release_;
  int64_t barrier_waiters_ = 0;
  std::vector<Removal> removals_;
};

}  // namespace r2sp

#endif  // R2SP_SCHEDULER_SCHEDULER_METRICS_H_
