// A training run's options (LoopOptions: its epochs and steps, emulation, evaluation, epoch
// plans, leaving and settling) and what it did (LoopResult), for the run (training_run.h), the
// C++ trainers' loop (training_loop.h) and the worker's session (worker_session.h).
#ifndef R2SP_WORKER_LOOP_OPTIONS_H_
#define R2SP_WORKER_LOOP_OPTIONS_H_

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace r2sp {

struct LoopOptions {
  int rank = 0;
  int epochs = 1;
  // The same on every worker, so that clocks line up.
  int64_t steps_per_epoch = 1;
  int64_t max_steps = 0;  // stop after this many steps in all (0: no limit)
  // A job resumed from checkpoints: the steps done before (the loop starts in the epoch and
  // at the place in it where step first_step falls; clocks go on from there).
  int64_t first_step = 0;
  // Emulation of a slower machine: the compute phase is stretched to this many times its
  // length (by sleeping after it). 1 = off.
  double compute_slowdown = 1.0;
  // Emulation of an accelerator: the compute phase lasts at least this many milliseconds per
  // sample of the batch (by sleeping after the real compute). 0 = off.
  double emulate_ms_per_sample = 0.0;
  int log_every = 50;  // progress line every this many steps (0: never)
  // Workloads that evaluate: also every this many steps (counted over the whole run), besides
  // after each epoch (0: after each epoch only).
  int64_t eval_every = 0;
  // Epochs planned by the scheduler (survivors take over dead workers' data; proto EpochPlan):
  // called before each epoch, with whether the run starts in it, and, for a run that starts at
  // first_step > 0, for the epochs before it too, to find where that step falls. It sets the
  // workload's data up for the epoch and returns the epoch's steps, which then stand in for
  // steps_per_epoch. Empty: every epoch has steps_per_epoch steps.
  std::function<absl::StatusOr<int64_t>(int epoch, bool starting)> plan_epoch;
  // Asked after every step: true ends the run there (the worker leaves the job: SIGTERM,
  // preemption), with LoopResult::left set. Empty: never.
  std::function<bool()> leave_requested;
  // Called once when the run's steps are done (not when it left), with the steps in all, before
  // the run's final evaluation, which then follows it instead of ending the last epoch: the
  // worker passes the final barrier there and pulls the final parameters into `params` (so the
  // evaluation is of the final model, by whichever worker evaluates once the membership
  // settled: final_sync.h). Empty: the final evaluation ends the last epoch.
  std::function<absl::Status(int64_t steps)> settle;
};

struct LoopResult {
  int64_t steps = 0;           // in all, first_step included
  int64_t samples = 0;
  int epochs = 0;              // completed
  double seconds = 0;          // wall time of the loop
  double compute_seconds = 0;  // compute phases (with any emulated slowdown)
  double wait_seconds = 0;     // slot waits and parked pulls
  double push_seconds = 0;
  double pull_seconds = 0;     // including parked time
  double last_epoch_loss = 0;  // mean over the last epoch's steps
  double test_accuracy = -1;   // after the last epoch, if evaluated
  int final_batch = 0;
  int64_t early_partitions = 0;  // --overlap: partition pushes begun during backward, in all
  int64_t overlapped_pulls = 0;  // --overlap: pulls left running into the next forward
  bool left = false;             // ended early: leave_requested (no evaluation after it)
};

}  // namespace r2sp

#endif  // R2SP_WORKER_LOOP_OPTIONS_H_
