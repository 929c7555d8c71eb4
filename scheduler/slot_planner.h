// R2SP's communication slots. The live workers form a ring in rank order; one worker holds
// the slot at a time (or up to `width`: set_width). The next worker in the ring is granted once
// it has asked, a holder has released if `width` hold it, and at least `gap` has passed since
// the previous grant, where
// gap = T / (h * W): T the smoothed compute time of an iteration (blocked time excluded), W the
// workers in the ring and those that finished training (whose phases are spread over the cycle
// already: as a job ends and the ring empties, its last members need not wait longer for their
// final slots), h the headroom (1.2 in the public reference implementation). Workers that
// finish computing out of turn wait for theirs, so pushes never collide and are evenly spaced.
// With a hold multiple k > 0 the gap is at most k * H, H the smoothed time from a grant to its
// release: the release already keeps pushes apart, and where a push holds the slot for a small
// part of T / (h * W) (a fast link) the longer gap only makes workers wait (the ring forms a gap
// per worker late; a late worker delays every grant behind it). Where pushes are long (a
// contended link) k * H exceeds T / (h * W) and the paper's gap stands.
// In first-come order (SlotOrder::kFirstCome) the slot goes to whoever asked first instead: a
// worker that is late does not hold up the ones behind it in the ring, which still never collide
// and keep the gap; with workers of equal pace the order settles into the same ring.
#ifndef R2SP_SCHEDULER_SLOT_PLANNER_H_
#define R2SP_SCHEDULER_SLOT_PLANNER_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace r2sp {

enum class SlotOrder { kRing, kFirstCome };

// Not thread-safe (the scheduler calls it under its lock). Times are passed in, for tests.
class SlotPlanner {
 public:
  // REQUIRES: headroom > 0, 0 < smoothing <= 1, hold_multiple >= 0 (0: T / (h * W) alone).
  SlotPlanner(double headroom, double smoothing, SlotOrder order = SlotOrder::kRing,
              double hold_multiple = 0);

  // The ring: these ranks, ascending. Resets the turn to the lowest rank.
  void SetMembers(std::vector<int> ranks);
  // Puts `rank` into the ring (a worker joined), in rank order, without disturbing whose turn
  // it is. Ranks already in it are ignored.
  void Add(int rank);
  // Takes `rank` out of the ring (died, or `finished` training): a slot it held is free again
  // and the turn passes to the next member if it was this one's. A finished worker still counts
  // in the gap's W. Unknown ranks are ignored.
  void Remove(int rank, bool finished = false);

  // `rank` finished computing an iteration that took `compute_seconds` and wants its slot.
  // InvalidArgument for a rank not in the ring or already waiting.
  absl::Status Request(int rank, double compute_seconds);
  // A holder is done communicating at `now`: the width in force when its slot was granted.
  // The hold's length feeds the gap's cap. InvalidArgument if `rank` does not hold the slot.
  absl::StatusOr<int> Release(int rank, absl::Time now);
  // How many may hold the slot at once from now on (1: R2SP's one at a time). Holders beyond
  // it keep their slot until they release. REQUIRES: width >= 1.
  void set_width(int width);

  // The rank to grant now, if any (at most one per call).
  std::optional<int> Poll(absl::Time now);
  // When Poll could next grant without another Request or Release (InfiniteFuture if never).
  absl::Time NextWakeup() const;

  absl::Duration gap() const;
  // The smoothed time from a grant to its release (zero before the first release).
  absl::Duration mean_hold() const { return absl::Seconds(hold_.mean); }
  int width() const { return width_; }
  int holders() const { return static_cast<int>(holds_.size()); }
  bool Holds(int rank) const;
  int64_t grants() const { return grants_; }
  // When the last grant was made (InfinitePast before the first).
  absl::Time last_grant() const { return last_grant_; }
  // The rank Poll would grant once the gap has passed, if any (ring: the turn, if it has asked;
  // first come: the earliest to ask), while the slot has room.
  std::optional<int> Candidate() const;
  // Grants made at each width: [w] counts those made while the width was w.
  const std::vector<int64_t>& grants_by_width() const { return grants_by_width_; }
  const std::vector<int>& ring() const { return ring_; }

 private:
  const double headroom_;
  const double smoothing_;
  const SlotOrder order_;
  const double hold_multiple_;
  std::vector<int> ring_;
  int finished_ = 0;  // workers that left the ring done training, since SetMembers
  size_t next_ = 0;  // index in ring_ of the next worker to grant
  int width_ = 1;
  struct Hold {
    int rank;
    int granted_width;
    absl::Time granted;
  };
  std::vector<Hold> holds_;
  absl::Time last_grant_ = absl::InfinitePast();
  std::deque<int> waiting_;  // in the order they asked
  // An exponential average of samples, each weighted `weight`; unknown before the first.
  struct Average {
    double mean = 0;
    bool known = false;
    void Add(double sample, double weight) {
      mean = known ? (1 - weight) * mean + weight * sample : sample;
      known = true;
    }
  };
  Average compute_;  // T: iterations' compute times
  Average hold_;     // H: grant to release
  int64_t grants_ = 0;
  std::vector<int64_t> grants_by_width_;
};

}  // namespace r2sp

#endif  // R2SP_SCHEDULER_SLOT_PLANNER_H_
