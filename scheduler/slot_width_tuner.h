// How many workers may hold R2SP's slot at once (--r2sp_slot_width=auto). One holder is the
// R2SP of the paper: pushes never collide, which is what a contended link needs. Where one push
// does not fill the servers' links (several servers, each taking part of every push, behind
// links as fast as the workers'), pushes in turn only queue workers that could have pushed
// together; there a wider slot runs well ahead of width 1
// (docs/RESULTS.md#a-wider-slot-when-one-push-does-not-fill-the-links).
//
// The tuner climbs the slot's throughput (holds released per second, measured over windows of
// `window` holds granted at the width being measured): it tries one more holder, keeps it if
// that raised the throughput by more than `margin`, else tries one fewer and keeps that unless
// it is `margin` or more below the best rate of the round, so the narrower width wins every
// close call. It then stays `settle` windows before trying again, so a link that becomes
// contended later (or stops being so) is noticed. On a contended link a second holder halves
// each push's rate and gains nothing: the width stays 1, at the cost of one window of
// collisions per round.
#ifndef R2SP_SCHEDULER_SLOT_WIDTH_TUNER_H_
#define R2SP_SCHEDULER_SLOT_WIDTH_TUNER_H_

#include <cstdint>

#include "absl/time/time.h"

namespace r2sp {

struct SlotWidthTunerOptions {
  int window = 16;       // holds per measurement
  double margin = 0.10;  // a wider slot must be this much faster to be kept
  int settle = 8;        // windows at the chosen width before trying again (>= 1)
};

// Not thread-safe. Times are passed in, for tests.
class SlotWidthTuner {
 public:
  // REQUIRES: window >= 2, margin >= 0, settle >= 1.
  SlotWidthTuner(const SlotWidthTunerOptions& options, int max_width);

  // A hold ended at `released`; it had been granted while the width was `granted_width`.
  // Holds granted at another width than the one being measured are not counted.
  void Observe(int granted_width, absl::Time released);
  // The ring's size changed: the width never exceeds it (at least 1).
  void SetMaxWidth(int max_width);

  // The width to grant by now: the chosen one, or one more or one fewer while trying them.
  int width() const { return current_; }
  // The width kept by the last decision.
  int chosen() const { return chosen_; }
  // Times a decision changed the chosen width (for the job report and tests; SetMaxWidth's
  // clamps are not counted).
  int64_t changes() const { return changes_; }
  // The throughput the chosen width was kept for (holds per second; 0 before one).
  double throughput() const { return chosen_rate_; }

 private:
  enum class Phase { kMeasure, kProbeUp, kProbeDown, kSettle };

  // Width `w` is in force and measured next, from the next hold granted at it.
  void Measure(Phase phase, int w);
  // The current window's throughput is in: keep or change the width, and move on.
  void Decide(double rate);
  void Choose(int w, double rate);
  // The chosen width stays in force for `settle` windows, the last of which measures it.
  void Settle();

  const SlotWidthTunerOptions options_;
  int max_width_;
  int chosen_ = 1;
  double chosen_rate_ = 0;
  double round_best_ = 0;  // the best rate of this round's windows
  int current_ = 1;       // in force and being measured
  Phase phase_ = Phase::kMeasure;
  bool climbed_ = false;  // this round went up: no point trying the width it came from
  int settled_ = 0;       // windows spent settling
  int counted_ = 0;       // holds in the current window
  absl::Time first_;      // the current window's first release
  int64_t changes_ = 0;
};

}  // namespace r2sp

#endif  // R2SP_SCHEDULER_SLOT_WIDTH_TUNER_H_
