// r2sp with --overlap: asks for the worker's slot before backward ends, so that the push of the
// partitions backward has finished overlaps the rest of it. The ask goes out once the compute
// is predicted to be within one push of its end, at start + C - P, where C is this worker's
// smoothed compute time and P its smoothed push time, from the grant to the end of the push,
// of the iterations whose gradient was complete when the grant came (one still waiting for
// backward would count that wait, and P would grow with each iteration it asked earlier; a
// complete one is the transfer alone, also when compute goes on after backward, as a paced
// step does). A timer thread sends it, so it does not depend on when backward reports. An early
// SLOT request reports the previous iteration (the current one's compute time is not known
// yet), which is what the gap planner and the batch tuner smooth anyway. The grant opens the
// bucket pusher's gate at once, on the transport's thread: the complete partitions go out and
// later ones follow as backward reports them. The first iteration, and any whose compute ends
// before the due time, ask after compute, as r2sp does without overlap. Measured against
// asking after backward in docs/RESULTS.md#overlapping-communication-with-compute.
#ifndef R2SP_WORKER_EARLY_SLOT_H_
#define R2SP_WORKER_EARLY_SLOT_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/delayed_calls.h"
#include "common/scheduler_client.h"
#include "worker/bucket_pusher.h"

namespace r2sp {

// What a SLOT request reports (SchedulerClient::RequestSlot's arguments).
struct SlotReport {
  int samples = 0;
  double compute_seconds = 0;
  double comm_seconds = 0;
  int64_t iterations_left = 0;
};

// When to ask for the slot of a compute that began at `start`: `push_seconds` before its
// predicted end, never before the start; InfiniteFuture without a prediction (compute_seconds
// <= 0).
absl::Time EarlyAskTime(absl::Time start, double compute_seconds, double push_seconds);

// The training thread calls Begin, MaybeAsk, Await and Record in turn, every iteration.
// Borrowed pointers outlive the EarlySlot; a grant that arrives after it is gone is dropped.
class EarlySlot {
 public:
  EarlySlot(SchedulerClient* scheduler, BucketPusher* pusher);
  ~EarlySlot();
  EarlySlot(const EarlySlot&) = delete;
  EarlySlot& operator=(const EarlySlot&) = delete;

  // A compute began at `start`; an early ask would report `previous` (the last iteration, with
  // the current one's iterations_left).
  void Begin(absl::Time start, const SlotReport& previous);
  // After compute: asks now, reporting `current`, unless it asked already; then waits for the
  // grant. Sets *granted to when the grant arrived.
  absl::StatusOr<proto::SlotGrant> Await(const SlotReport& current, absl::Time* granted);
  // The iteration's compute time, and when its push ended: its time from the grant is learnt
  // unless `waited_for_backward` (the gradient was not complete when the grant came).
  void Record(double compute_seconds, absl::Time push_ended, bool waited_for_backward);
  // P, the smoothed push time an early ask is timed by (0 before the first learnt push).
  double predicted_push_seconds() const { return push_seconds_; }

 private:
  // What the grant's callback reaches: outlives the EarlySlot if a reply is still on its way.
  struct Shared {
    absl::Mutex mu;
    BucketPusher* pusher ABSL_GUARDED_BY(mu);  // null once the EarlySlot is gone
    uint64_t iteration ABSL_GUARDED_BY(mu) = 0;  // Begin's count: a late timer asks for nothing
    bool asked ABSL_GUARDED_BY(mu) = false;
    // This iteration's answer, once it came.
    std::optional<absl::StatusOr<proto::SlotGrant>> grant ABSL_GUARDED_BY(mu);
    absl::Time granted ABSL_GUARDED_BY(mu);
    bool Arrived() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return grant.has_value(); }
  };
  // Sends iteration `iteration`'s SLOT request unless it went out already.
  void AskOnce(uint64_t iteration, const SlotReport& report);

  SchedulerClient* const scheduler_;
  const std::shared_ptr<Shared> shared_;
  double compute_seconds_ = 0;  // smoothed; 0 until the first Record
  double push_seconds_ = 0;
  uint64_t iteration_ = 0;
  DelayedCalls timer_;  // last: joined before the rest goes
};

}  // namespace r2sp

#endif  // R2SP_WORKER_EARLY_SLOT_H_
