// The scheduler's r2sp and tuning part: the slot ring (SlotPlanner) with the workers waiting
// for their grant, the slot's width (fixed, or tuned by a SlotWidthTuner from the releases),
// and the batch tuner (BatchTuner) that SLOT and REPORT feed with each iteration's samples and
// times and whose batch sizes go back in grants and REPORT replies.
// Membership tells it who trains (SetMembers, WorkerJoined, WorkerLeft).
#ifndef R2SP_SCHEDULER_SLOT_COORDINATOR_H_
#define R2SP_SCHEDULER_SLOT_COORDINATOR_H_

#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "common/handler.h"
#include "scheduler/batch_tuner.h"
#include "scheduler/slot_planner.h"
#include "scheduler/slot_stats.h"
#include "scheduler/slot_width_tuner.h"

namespace r2sp {

// The r2sp slot and the batch tuning; SchedulerOptions.slots, checked by
// SchedulerOptions::Validate (which names each field as slots.<field>).
struct SlotCoordinatorOptions {
  double headroom = 1.2;         // r2sp: gap = T / (headroom * W). REQUIRES: > 0
  // r2sp: the gap is at most this many times a hold's smoothed length (SlotPlanner); 0: never.
  // REQUIRES: >= 0
  double gap_holds = 2;
  SlotOrder order = SlotOrder::kRing;  // r2sp: who gets the free slot
  int width = 1;                 // r2sp: holders at once; 0: tuned by a SlotWidthTuner. >= 0
  SlotWidthTunerOptions width_tuning;  // with width 0
  // r2sp: workers release after the pull, not the push. The coordinator does not read it:
  // it reaches the workers in the address book.
  bool includes_pull = false;
  bool hetero_batching = false;  // REPORT is accepted only with hetero batching
  // With hetero_batching. REQUIRES: 1 <= min_batch <= max_batch, and with hetero_batching
  // num_workers * min_batch <= global_batch <= num_workers * max_batch.
  BatchTunerOptions batching;
};

// Not thread-safe: SchedulerCore calls it under its lock.
class SlotCoordinator {
 public:
  // `r2sp`: the job's sync mode is r2sp (SLOT and RELEASE are accepted only then; a width of
  // 0 is tuned only then). REQUIRES: options.width >= 0.
  SlotCoordinator(const SlotCoordinatorOptions& options, bool r2sp);

  // The job's workers at rendezvous (ranks 0..n-1).
  void SetMembers(int num_workers);
  void WorkerJoined(int rank);
  // Died or finished: out of the ring and the tuner; a slot it held or waited for is gone.
  void WorkerLeft(int rank, absl::Time now);

  // SLOT: the worker's report feeds the gap and the tuner; `responder` is answered with the
  // grant (gap, index, batch) when the worker's turn comes, or now with an error.
  void RequestSlot(int rank, const proto::IterationReport& report, Responder responder,
                   absl::Time now);
  // RELEASE; `leaving` takes the worker out of the ring after its last slot.
  absl::Status Release(int rank, bool leaving, absl::Time now);
  // REPORT (hetero batching outside r2sp): the batch size to use from the next iteration.
  absl::StatusOr<proto::BatchAssignment> Report(int rank, const proto::IterationReport& report);

  // Whether `rank` is waiting for its grant (it cannot make progress meanwhile).
  bool IsWaiting(int rank) const { return waiting_.contains(rank); }

  // Grants due by `now` (the gap has passed).
  void GrantDue(absl::Time now);
  absl::Time NextWakeup() const { return planner_.NextWakeup(); }

  // For the address book and the job report; the tuner is null without hetero batching, the
  // width tuner without a tuned width.
  const BatchTuner* tuner() const { return tuner_.get(); }
  const SlotWidthTuner* width_tuner() const { return width_tuner_.get(); }
  const SlotPlanner& planner() const { return planner_; }
  const SlotStats& stats() const { return stats_; }

 private:
  proto::BatchAssignment Assignment(int worker) const;
  // The ring changed size: the tuned width stays within it.
  void RingChanged();
  // The planner's candidate at `now`: if it changed, the new one is candidate since `now` (for
  // when its grant is due: SlotStats).
  void NoteCandidate(absl::Time now);

  const SlotCoordinatorOptions options_;
  const bool r2sp_;
  SlotPlanner planner_;
  absl::flat_hash_map<int, Responder> waiting_;  // by worker rank
  std::unique_ptr<BatchTuner> tuner_;
  std::unique_ptr<SlotWidthTuner> width_tuner_;
  SlotStats stats_;
  std::optional<int> candidate_;
  absl::Time candidate_since_ = absl::InfinitePast();
};

}  // namespace r2sp

#endif  // R2SP_SCHEDULER_SLOT_COORDINATOR_H_
