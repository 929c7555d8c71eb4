// Tests of EmulatedStep (which exists only when emulating: training_run_test checks that): held
// reports are replayed at their stretched times, the wait for the pull is not stretched, and
// forward's reads are paced at the previous step's stretch. Real time, milliseconds apart:
// lower bounds are exact sleeps, upper bounds leave room for a loaded machine.
#include "worker/emulated_step.h"

#include <cstdint>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace r2sp {
namespace {

// The sinks' calls, in milliseconds since `start`; the pull stall the needed sink adds.
struct Recorder {
  absl::Time start = absl::Now();
  absl::Duration stall;
  absl::Duration stall_per_read;  // each read waits this long for the pull
  std::vector<double> ready_ms, needed_ms;
  std::vector<int64_t> ready_offsets;

  EmulatedStepSinks Sinks() {
    return {[this](HostGradient, int64_t offset, int64_t) {
              ready_ms.push_back(Ms());
              ready_offsets.push_back(offset);
            },
            [this](int64_t, int64_t) {
              needed_ms.push_back(Ms());
              absl::SleepFor(stall_per_read);
              stall += stall_per_read;
            },
            [this] { return stall; }};
  }
  double Ms() const { return absl::ToDoubleMilliseconds(absl::Now() - start); }
};

const float kGrads[4] = {};

TEST(EmulatedStepTest, ReportsAreReplayedAtTheirStretchedTimes) {
  Recorder r;
  EmulatedStep step(r.Sinks());
  step.Begin(r.start);
  // Each report's real time is taken around it: a loaded machine oversleeps the 10 ms, and the
  // replay is due at 3x whatever the real time was (at most 25 ms late to wake up).
  absl::SleepFor(absl::Milliseconds(10));
  const double first_before = r.Ms();
  step.Report(kGrads, 2, 2);
  const double first_after = r.Ms();
  absl::SleepFor(absl::Milliseconds(10));
  const double second_before = r.Ms();
  step.Report(kGrads, 0, 2);
  const double second_after = r.Ms();
  EXPECT_TRUE(r.ready_ms.empty());  // held
  step.Finish(3.0);
  ASSERT_EQ(r.ready_offsets, (std::vector<int64_t>{2, 0}));
  EXPECT_GE(r.ready_ms[0], 3 * first_before);
  EXPECT_LT(r.ready_ms[0], 3 * first_after + 25.0);
  EXPECT_GE(r.ready_ms[1], 3 * second_before);
  EXPECT_LT(r.ready_ms[1], 3 * second_after + 25.0);
}

// A forward that waits 50 ms for the pull, computes 10 ms and reports: at 4x the report is due
// at 50 + 4 x 10 = 90 ms, not 4 x 60 = 240 (the wait stretched with the compute).
TEST(EmulatedStepTest, TheWaitForThePullIsNotStretched) {
  Recorder r;
  r.stall_per_read = absl::Milliseconds(50);
  EmulatedStep step(r.Sinks());
  step.Begin(r.start);
  step.ParamsNeeded(0, 4);  // the first step: no pace known yet, so read at once
  EXPECT_LT(r.needed_ms[0], 5.0);
  absl::SleepFor(absl::Milliseconds(10));
  const double before = r.Ms();
  step.Report(kGrads, 0, 4);
  const double after = r.Ms();
  step.Finish(4.0);
  ASSERT_EQ(r.ready_ms.size(), 1u);
  // Due at the 50 ms stall plus 4x the real compute after it (about 90 ms; stretching the
  // stall too would make it about 240, past the upper bound's 115).
  EXPECT_GE(r.ready_ms[0], 50 + 4 * (before - 50));
  EXPECT_LT(r.ready_ms[0], 50 + 4 * (after - 50) + 25.0);
  EXPECT_EQ(step.paced(), absl::ZeroDuration());
}

// After a step stretched 5x, a read 10 ms into the next step's compute waits until 50 ms, where
// the emulated forward gets to it; those 40 ms are paced (emulated compute), and a report 5 ms
// of real compute later is due at 5 x 15 = 75 ms.
TEST(EmulatedStepTest, ReadsArePacedAtThePreviousStepsStretch) {
  Recorder r;
  EmulatedStep step(r.Sinks());
  step.Begin(r.start);
  step.Finish(5.0);
  r.start = absl::Now();
  step.Begin(r.start);
  absl::SleepFor(absl::Milliseconds(10));
  const double read_at = r.Ms();  // about 10
  step.ParamsNeeded(0, 4);
  ASSERT_EQ(r.needed_ms.size(), 1u);
  EXPECT_GE(r.needed_ms[0], 5 * read_at);
  EXPECT_LT(r.needed_ms[0], 5 * read_at + 25.0);
  const double paced_ms = absl::ToDoubleMilliseconds(step.paced());
  EXPECT_GE(paced_ms, 4 * read_at - 0.01);
  EXPECT_LT(paced_ms, 4 * read_at + 25.0);
  absl::SleepFor(absl::Milliseconds(5));
  const double before = r.Ms();
  step.Report(kGrads, 0, 4);
  const double after = r.Ms();
  step.Finish(5.0);
  ASSERT_EQ(r.ready_ms.size(), 1u);
  EXPECT_GE(r.ready_ms[0], 5 * (before - paced_ms));
  EXPECT_LT(r.ready_ms[0], 5 * (after - paced_ms) + 25.0);
}

}  // namespace
}  // namespace r2sp
