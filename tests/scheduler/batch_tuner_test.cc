// The heterogeneity-aware batch tuner: proportional sizes, the sum kept, bounds, hysteresis.
#include "scheduler/batch_tuner.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>

#include "gtest/gtest.h"

namespace r2sp {
namespace {

int Sum(const std::vector<int>& v) { return std::accumulate(v.begin(), v.end(), 0); }

TEST(BatchTunerTest, ProportionalSplitKeepsTheSumAndBounds) {
  EXPECT_EQ(ProportionalSplit(256, {1, 2, 2, 2}, 1, 1000), (std::vector<int>{37, 73, 73, 73}));
  EXPECT_EQ(Sum(ProportionalSplit(100, {1, 1, 1}, 1, 1000)), 100);
  // Bounds: the slow worker is raised to min and the others share the rest.
  const std::vector<int> clamped = ProportionalSplit(100, {1, 50, 50}, 10, 1000);
  EXPECT_EQ(clamped[0], 10);
  EXPECT_EQ(Sum(clamped), 100);
  const std::vector<int> capped = ProportionalSplit(100, {100, 1, 1}, 1, 40);
  EXPECT_EQ(capped[0], 40);
  EXPECT_EQ(Sum(capped), 100);
  // Impossible bounds: as close as they allow.
  EXPECT_EQ(ProportionalSplit(100, {1, 1}, 1, 30), (std::vector<int>{30, 30}));
}

TEST(BatchTunerTest, ConvergesToProportionalSizes) {
  BatchTunerOptions o;
  o.global_batch = 256;
  o.min_batch = 8;
  o.max_batch = 512;
  o.hysteresis = 0.0;  // every improvement adopted: converges exactly
  BatchTuner t(o, 4);
  EXPECT_EQ(t.batch(0), 64);  // equal split to begin with
  // Worker 3 is half as fast (samples per second) as the others.
  for (int round = 0; round < 60; ++round) {
    for (int w = 0; w < 4; ++w) {
      const double speed = w == 3 ? 500 : 1000;
      const int b = t.batch(w);
      t.Report(w, b, b / speed);
    }
  }
  EXPECT_EQ(t.batch(3), 37);
  for (int w = 0; w < 3; ++w) EXPECT_EQ(t.batch(w), 73);
  EXPECT_EQ(t.batch(0) + t.batch(1) + t.batch(2) + t.batch(3), 256);
  EXPECT_NEAR(t.throughput(3), 500, 1e-6);
}

TEST(BatchTunerTest, HysteresisStopsFlapping) {
  BatchTunerOptions o;
  o.global_batch = 200;
  o.hysteresis = 0.10;
  BatchTuner t(o, 2);
  // Throughputs 3% apart: the ideal split (98/102) is within the 10% hysteresis of 100/100.
  for (int round = 0; round < 20; ++round) {
    t.Report(0, 100, 100 / 1000.0);
    t.Report(1, 100, 100 / 1030.0);
  }
  EXPECT_EQ(t.changes(), 0);
  EXPECT_EQ(t.batch(0), 100);
  // A real difference (2x) is acted on.
  for (int round = 0; round < 20; ++round) {
    t.Report(0, t.batch(0), t.batch(0) / 1000.0);
    t.Report(1, t.batch(1), t.batch(1) / 2000.0);
  }
  EXPECT_GE(t.changes(), 1);
  EXPECT_NEAR(t.batch(1), 133, 0.10 * 133);  // settles within the hysteresis of the ideal
}

TEST(BatchTunerTest, WaitsForEveryWorkerAndDropsLeavers) {
  BatchTunerOptions o;
  o.global_batch = 90;
  o.reports_between_changes = 2;
  o.hysteresis = 0.05;
  BatchTuner t(o, 3);
  for (int i = 0; i < 5; ++i) t.Report(0, 30, 30 / 3000.0);  // only worker 0 reports
  EXPECT_EQ(t.changes(), 0);
  t.Remove(2);
  for (int i = 0; i < 3; ++i) {
    t.Report(0, t.batch(0), t.batch(0) / 3000.0);
    t.Report(1, t.batch(1), t.batch(1) / 1500.0);
  }
  EXPECT_EQ(t.batch(0), 60);  // B shared by the two left, 2:1
  EXPECT_EQ(t.batch(1), 30);
  EXPECT_EQ(t.Ideal()[2], 0);
  EXPECT_GT(t.Ideal(/*include_departed=*/true)[2], 0);  // the final report still shows it
}

// A slower CPU communicates slower too: sizes even out compute + communication, not compute
// alone. v = 1000 and 500 samples/s, c = 20 and 40 ms, B = 150: K = 190/1500 s, so
// b = 1000 (K - 0.02) = 106.7 and 500 (K - 0.04) = 43.3; both iterations then take 127 ms
// (proportional sizes 100/50 would take 120 and 140 ms).
TEST(BatchTunerTest, EvensOutComputePlusCommunication) {
  BatchTunerOptions o;
  o.global_batch = 150;
  o.hysteresis = 0.0;
  BatchTuner t(o, 2);
  for (int round = 0; round < 30; ++round) {
    t.Report(0, t.batch(0), t.batch(0) / 1000.0, 0.020);
    t.Report(1, t.batch(1), t.batch(1) / 500.0, 0.040);
  }
  EXPECT_EQ(t.batch(0), 107);
  EXPECT_EQ(t.batch(1), 43);
  EXPECT_NEAR(t.comm_seconds(1), 0.040, 1e-9);
  // Equal communication times change nothing against the proportional split.
  BatchTuner u(o, 2);
  for (int round = 0; round < 30; ++round) {
    u.Report(0, u.batch(0), u.batch(0) / 1000.0, 0.030);
    u.Report(1, u.batch(1), u.batch(1) / 500.0, 0.030);
  }
  EXPECT_EQ(u.batch(0), 100);
  EXPECT_EQ(u.batch(1), 50);
}

// Equal finish: a worker with more iterations left (behind) gets shorter iterations. v = 1000
// samples/s and c = 10 ms for both, B = 200, R = 150 and 100 left, horizon 50: r = 200 and 150,
// F = (200 + 20) / (1000/200 + 1000/150) = 18.857 s, b = 1000 (F/r - 0.01) = 84.3 and 115.7;
// both then finish in 18.86 s of iterations (84 ms + 10 ms) x 200 = (116 + 10) x 150.
TEST(BatchTunerTest, AWorkerBehindGetsShorterIterationsToFinishWithTheOthers) {
  BatchTunerOptions o;
  o.global_batch = 200;
  o.hysteresis = 0.0;
  ASSERT_EQ(o.finish_horizon, 50);
  BatchTuner t(o, 2);
  for (int round = 0; round < 30; ++round) {
    t.Report(0, t.batch(0), t.batch(0) / 1000.0, 0.010, /*iterations_left=*/150);
    t.Report(1, t.batch(1), t.batch(1) / 1000.0, 0.010, /*iterations_left=*/100);
  }
  EXPECT_EQ(t.batch(0), 84);
  EXPECT_EQ(t.batch(1), 116);
  // Equal counts left, or a worker that does not say: equal iteration times (100 / 100).
  for (const int64_t left : {100, 0}) {
    BatchTuner u(o, 2);
    for (int round = 0; round < 30; ++round) {
      u.Report(0, u.batch(0), u.batch(0) / 1000.0, 0.010, 150);
      u.Report(1, u.batch(1), u.batch(1) / 1000.0, 0.010, left == 100 ? 150 : 0);
    }
    EXPECT_EQ(u.batch(0), 100) << left;
    EXPECT_EQ(u.batch(1), 100) << left;
  }
  // Nonsense from the network: a count past any job's length gets the minimum, a negative
  // one counts as unknown; the sizes still sum to B.
  BatchTuner v(o, 2);
  for (int round = 0; round < 30; ++round) {
    v.Report(0, v.batch(0), v.batch(0) / 1000.0, 0.010, INT64_MAX);
    v.Report(1, v.batch(1), v.batch(1) / 1000.0, 0.010, 100);
  }
  EXPECT_EQ(v.batch(0), o.min_batch);
  EXPECT_EQ(v.batch(0) + v.batch(1), 200);
  BatchTuner w(o, 2);
  for (int round = 0; round < 30; ++round) {
    w.Report(0, w.batch(0), w.batch(0) / 1000.0, 0.010, -5);
    w.Report(1, w.batch(1), w.batch(1) / 1000.0, 0.010, 100);
  }
  EXPECT_EQ(w.batch(0), 100);
}

TEST(BatchTunerTest, CommunicationLongerThanAnIterationGetsTheMinimum) {
  BatchTunerOptions o;
  o.global_batch = 100;
  o.min_batch = 4;
  o.hysteresis = 0.0;
  BatchTuner t(o, 2);
  for (int round = 0; round < 30; ++round) {
    t.Report(0, t.batch(0), t.batch(0) / 1000.0, 0.0);
    t.Report(1, t.batch(1), t.batch(1) / 1000.0, 10.0);  // 10 s of communication
    t.Report(1, t.batch(1), t.batch(1) / 1000.0, -1.0);  // nonsense: ignored
  }
  EXPECT_EQ(t.batch(1), 4);
  EXPECT_EQ(t.batch(0), 96);
  EXPECT_NEAR(t.comm_seconds(1), 10.0, 1e-9);
}

// Found by tests/fuzz:scheduler_core: a NaN weight made a NaN share, cast to int (undefined
// behaviour, reported by UBSan under --config=asan); huge weights overflowed into NaN.
TEST(BatchTunerTest, ProportionalSplitTakesNonFiniteAndHugeWeights) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(ProportionalSplit(100, {std::nan(""), 1}, 1, 1000), (std::vector<int>{1, 99}));
  EXPECT_EQ(ProportionalSplit(100, {-1, 1}, 1, 1000), (std::vector<int>{1, 99}));
  EXPECT_EQ(ProportionalSplit(101, {inf, 1, inf}, 1, 1000), (std::vector<int>{50, 1, 50}));
  EXPECT_EQ(ProportionalSplit(256, {1e308, 1e308}, 1, 1000), (std::vector<int>{128, 128}));
}

// Found by tests/fuzz:scheduler_core: a report whose throughput overflowed held the worker's
// at +Inf for good (and made the ideal sizes NaN).
TEST(BatchTunerTest, AThroughputThatOverflowsIsIgnored) {
  BatchTunerOptions o;
  o.global_batch = 256;
  o.min_batch = 8;
  o.max_batch = 512;
  o.hysteresis = 0.0;
  BatchTuner t(o, 2);
  t.Report(0, 64, 1e-310);  // 64 samples in 1e-310 s: +Inf samples/s
  EXPECT_EQ(t.throughput(0), 0);
  for (int round = 0; round < 30; ++round) {
    t.Report(0, t.batch(0), t.batch(0) / 3000.0);
    t.Report(1, t.batch(1), t.batch(1) / 1000.0);
  }
  EXPECT_EQ(t.batch(0), 192);
  EXPECT_EQ(t.batch(1), 64);
}

}  // namespace
}  // namespace r2sp
