// See slot_width_tuner.h.
#include "scheduler/slot_width_tuner.h"

#include <algorithm>

#include "glog/logging.h"

namespace r2sp {

SlotWidthTuner::SlotWidthTuner(const SlotWidthTunerOptions& options, int max_width)
    : options_(options), max_width_(std::max(max_width, 1)) {
  CHECK_GE(options.window, 2);
  CHECK_GE(options.margin, 0);
  CHECK_GE(options.settle, 1);
}

void SlotWidthTuner::SetMaxWidth(int max_width) {
  max_width_ = std::max(max_width, 1);
  if (current_ <= max_width_ && chosen_ <= max_width_) return;
  chosen_ = std::min(chosen_, max_width_);  // not a decision: not counted in changes()
  chosen_rate_ = 0;                          // measured afresh, from the next window
  Measure(Phase::kMeasure, chosen_);
}

void SlotWidthTuner::Measure(Phase phase, int w) {
  phase_ = phase;
  current_ = w;
  counted_ = 0;
}

void SlotWidthTuner::Choose(int w, double rate) {
  if (w != chosen_) ++changes_;
  chosen_ = w;
  chosen_rate_ = rate;
}

void SlotWidthTuner::Observe(int granted_width, absl::Time released) {
  if (granted_width != current_) return;  // granted before the width in force was set
  if (counted_ == 0) first_ = released;
  if (++counted_ < options_.window) return;
  const double seconds = absl::ToDoubleSeconds(released - first_);
  // Holds released all at once (a clock too coarse to tell them apart): as fast as can be told.
  Decide(seconds > 0 ? (counted_ - 1) / seconds : 1e12);
}

void SlotWidthTuner::Settle() {
  settled_ = 0;
  Measure(Phase::kSettle, chosen_);
}

void SlotWidthTuner::Decide(double rate) {
  const double margin = 1 + options_.margin;
  switch (phase_) {
    case Phase::kSettle:
      if (++settled_ < options_.settle) return Measure(Phase::kSettle, chosen_);
      [[fallthrough]];  // the last settling window measures the chosen width afresh
    case Phase::kMeasure:
      Choose(chosen_, rate);
      round_best_ = rate;
      climbed_ = false;
      if (chosen_ < max_width_) return Measure(Phase::kProbeUp, chosen_ + 1);
      if (chosen_ > 1) return Measure(Phase::kProbeDown, chosen_ - 1);
      return Settle();
    case Phase::kProbeUp:
      round_best_ = std::max(round_best_, rate);
      if (rate > chosen_rate_ * margin) {
        Choose(current_, rate);
        climbed_ = true;
        if (chosen_ < max_width_) return Measure(Phase::kProbeUp, chosen_ + 1);
        return Settle();
      }
      if (!climbed_ && chosen_ > 1) return Measure(Phase::kProbeDown, chosen_ - 1);
      return Settle();
    case Phase::kProbeDown:
      // Narrower and within the margin of the best rate of this round (the one tried above
      // included): keep it, and go on down. The best stays the reference, so losses within the
      // margin cannot add up, step by step or round by round.
      if (rate * margin > round_best_) {
        Choose(current_, rate);
        if (chosen_ > 1) return Measure(Phase::kProbeDown, chosen_ - 1);
      }
      return Settle();
  }
}

}  // namespace r2sp
