// The compute phase of an emulated slower machine (--emulate_ms_per_sample, --compute_slowdown):
// the workload's real compute is short and the loop makes the step last its target
// (TrainingRun, only when emulating).
// Backward really ends early and the sleep after it stands for the rest, so the pieces of work
// that start inside the compute are moved to where that machine would have reached them:
// - backward's gradient-ready reports are held and replayed over the stretched compute at the
//   same fractions of it (pushes start when that machine's backward would have produced them);
// - with overlapped pulls, each forward read of the parameters waits first until that
//   machine's forward would have got there (at the previous step's stretch), so the pull has
//   the emulated forward's time to land, as on the real machine.
// Time waited for the pull is not compute and is not stretched (stretched, it put the reports
// and so the step's end stall x stretch late: 2.9 s steps paced at 1.28 s on 419 Mbit/s links).
// It exists only when emulating (TrainingRun's pacer); without it reports and reads go
// straight to the exchanger.
#ifndef R2SP_WORKER_EMULATED_STEP_H_
#define R2SP_WORKER_EMULATED_STEP_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/time/time.h"
#include "worker/workload.h"

namespace r2sp {

// Where reports and reads go, and the pull stall so far (Exchanger::pull_stall).
struct EmulatedStepSinks {
  GradientReady ready;
  ParamsNeeded needed;
  std::function<absl::Duration()> pull_stall;
};

// One step at a time: Begin, then reads and reports (from the thread that computes, or a
// script's thread whose calls the loop's thread serves in turn), then Finish.
class EmulatedStep {
 public:
  explicit EmulatedStep(EmulatedStepSinks sinks);

  void Begin(absl::Time start);
  // Backward finished [offset, offset + count) of grads.
  void Report(HostGradient grads, int64_t offset, int64_t count);
  // Forward is about to read [offset, offset + count) of the parameters.
  void ParamsNeeded(int64_t offset, int64_t count);
  // Slept this step before reads (emulated compute, not the workload's own).
  absl::Duration paced() const { return paced_; }
  // The compute is done and is to last `stretch` times the real compute (without the pull
  // stall and paced()): replays the held reports at their stretched times, sleeping between.
  // The stretch paces the next step's reads (a step whose real compute differs much from the
  // last one's can end a little past its target).
  void Finish(double stretch);

 private:
  struct Held {
    absl::Duration at;       // real compute before it
    absl::Duration stalled;  // the step's pull stall before it
    HostGradient grads;
    int64_t offset, count;
  };
  absl::Duration Stalled() const { return sinks_.pull_stall() - stall_before_; }

  const EmulatedStepSinks sinks_;
  absl::Time start_;
  absl::Duration stall_before_;
  absl::Duration paced_;  // slept before reads this step
  double stretch_ = 1.0;  // the last step's: the reads' pace
  std::vector<Held> held_;
};

}  // namespace r2sp

#endif  // R2SP_WORKER_EMULATED_STEP_H_
