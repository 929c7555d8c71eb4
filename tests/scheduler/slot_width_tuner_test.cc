// The r2sp slot width tuner on synthetic releases: where each width gives its own release
// rate, it climbs while one more holder pays by more than the margin, stays at 1 where it
// never does (a contended link), comes back down when the wider slot stops paying, never drifts
// down by small losses that add up, ignores holds granted at another width, and keeps within
// the ring.
#include "scheduler/slot_width_tuner.h"

#include <functional>
#include <map>

#include "gtest/gtest.h"

namespace r2sp {
namespace {

// Releases `holds` holds, one after another at the rate `rate(width in force)` per second.
void Release(SlotWidthTuner& tuner, const std::function<double(int)>& rate, int holds,
         absl::Time* now) {
  for (int i = 0; i < holds; ++i) {
    const int width = tuner.width();
    *now += absl::Seconds(1 / rate(width));
    tuner.Observe(width, *now);
  }
}

std::function<double(int)> Rates(std::map<int, double> by_width) {
  return [by_width](int w) { return by_width.at(w); };
}

SlotWidthTunerOptions Options() {
  SlotWidthTunerOptions options;
  options.window = 8;
  options.margin = 0.1;
  options.settle = 4;
  return options;
}

TEST(SlotWidthTunerTest, ClimbsWhileAnotherHolderPays) {
  SlotWidthTuner tuner(Options(), /*max_width=*/4);
  absl::Time now = absl::UnixEpoch();
  // Loopback with cores to spare: 2 and 3 holders get through faster, a 4th only 3% more.
  const auto loopback = Rates({{1, 100}, {2, 180}, {3, 250}, {4, 258}});
  Release(tuner, loopback, 400, &now);
  EXPECT_EQ(tuner.chosen(), 3);
  EXPECT_EQ(tuner.changes(), 2);
  EXPECT_NEAR(tuner.throughput(), 250, 1);
  // Between rounds it tries 4 again (and 2) but keeps 3.
  for (int i = 0; i < 20; ++i) {
    Release(tuner, loopback, 8, &now);
    EXPECT_EQ(tuner.chosen(), 3);
    EXPECT_GE(tuner.width(), 2);
  }
}

TEST(SlotWidthTunerTest, StaysAtOneOnAContendedLink) {
  SlotWidthTuner tuner(Options(), 4);
  absl::Time now = absl::UnixEpoch();
  // One link shared by every push: a second holder halves each one's rate, the slot's is flat
  // (a little worse, from the collisions).
  const auto contended = Rates({{1, 4}, {2, 3.9}, {3, 3.8}, {4, 3.7}});
  Release(tuner, contended, 200, &now);
  EXPECT_EQ(tuner.chosen(), 1);
  EXPECT_EQ(tuner.changes(), 0);
  // Each round tries 2 for one window and goes back: 1 window in settle + 1 = 5.
  int wide = 0;
  for (int i = 0; i < 200; ++i) {
    wide += tuner.width() > 1;
    Release(tuner, contended, 1, &now);
  }
  EXPECT_GE(wide, 8);
  EXPECT_LE(wide, 200 / 5 + 8);
  EXPECT_EQ(tuner.chosen(), 1);
}

TEST(SlotWidthTunerTest, AWiderSlotMustBeatTheMargin) {
  SlotWidthTuner tuner(Options(), 2);
  absl::Time now = absl::UnixEpoch();
  Release(tuner, Rates({{1, 100}, {2, 109}}), 200, &now);  // 9% more: not enough
  EXPECT_EQ(tuner.chosen(), 1);
  Release(tuner, Rates({{1, 100}, {2, 112}}), 200, &now);  // 12%: kept at the next round
  EXPECT_EQ(tuner.chosen(), 2);
}

TEST(SlotWidthTunerTest, ComesBackDownWhenTheLinkBecomesContended) {
  SlotWidthTuner tuner(Options(), 4);
  absl::Time now = absl::UnixEpoch();
  Release(tuner, Rates({{1, 100}, {2, 200}, {3, 300}, {4, 400}}), 400, &now);
  EXPECT_EQ(tuner.chosen(), 4);
  Release(tuner, Rates({{1, 50}, {2, 50}, {3, 50}, {4, 50}}), 400, &now);
  EXPECT_EQ(tuner.chosen(), 1);
}

TEST(SlotWidthTunerTest, SmallLossesDoNotAddUpOnTheWayDown) {
  SlotWidthTuner tuner(Options(), 4);
  absl::Time now = absl::UnixEpoch();
  Release(tuner, Rates({{1, 100}, {2, 200}, {3, 300}, {4, 400}}), 400, &now);
  ASSERT_EQ(tuner.chosen(), 4);
  // Each narrower width loses under 10% to the next wider one, 1 loses 24% to 4: 3 is the
  // narrowest within the margin of the best, round after round.
  for (int round = 0; round < 10; ++round) {
    Release(tuner, Rates({{1, 76}, {2, 86}, {3, 93}, {4, 100}}), 100, &now);
    EXPECT_EQ(tuner.chosen(), 3) << round;
  }
}

TEST(SlotWidthTunerTest, HoldsGrantedAtAnotherWidthAreNotCounted) {
  SlotWidthTuner tuner(Options(), 2);
  absl::Time now = absl::UnixEpoch();
  for (int i = 0; i < 100; ++i) {
    now += absl::Milliseconds(1);
    tuner.Observe(/*granted_width=*/2, now);  // 1 is in force: none of these counts
  }
  EXPECT_EQ(tuner.width(), 1);
  EXPECT_EQ(tuner.throughput(), 0);
  Release(tuner, Rates({{1, 100}, {2, 100}}), 8, &now);  // one window at 1
  EXPECT_NEAR(tuner.throughput(), 100, 1);
  EXPECT_EQ(tuner.width(), 2);  // then 2 is tried
}

TEST(SlotWidthTunerTest, StaysWithinTheRing) {
  SlotWidthTuner tuner(Options(), 1);
  absl::Time now = absl::UnixEpoch();
  Release(tuner, Rates({{1, 100}, {2, 200}, {3, 300}}), 200, &now);
  EXPECT_EQ(tuner.chosen(), 1);  // one worker: nothing to try
  EXPECT_EQ(tuner.width(), 1);
  tuner.SetMaxWidth(3);
  Release(tuner, Rates({{1, 100}, {2, 200}, {3, 300}}), 400, &now);
  EXPECT_EQ(tuner.chosen(), 3);
  const int64_t changes = tuner.changes();
  tuner.SetMaxWidth(2);  // a worker left
  EXPECT_EQ(tuner.width(), 2);
  EXPECT_EQ(tuner.chosen(), 2);
  EXPECT_EQ(tuner.changes(), changes);  // not a decision
  tuner.SetMaxWidth(0);
  EXPECT_EQ(tuner.width(), 1);
}

}  // namespace
}  // namespace r2sp
