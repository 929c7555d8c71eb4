// R2SP's slot planner: ring and first-come order, one holder (or `width`), the gap and its cap
// at a multiple of the hold, compute smoothing, join/leave/death.
#include "scheduler/slot_planner.h"

#include "gtest/gtest.h"

namespace r2sp {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(SlotPlannerTest, GrantsInRingOrderOneAtATime) {
  SlotPlanner p(/*headroom=*/1.0, /*smoothing=*/1.0);
  p.SetMembers({2, 0, 1});
  // Worker 1 asks first, but the ring starts at 0: nothing until 0 asks.
  ASSERT_TRUE(p.Request(1, 0).ok());
  EXPECT_FALSE(p.Poll(kT0).has_value());
  ASSERT_TRUE(p.Request(0, 0).ok());
  EXPECT_EQ(p.Poll(kT0), 0);
  EXPECT_FALSE(p.Poll(kT0).has_value());  // 0 holds the slot
  EXPECT_FALSE(p.Release(1, kT0).ok());   // only the holder releases
  ASSERT_TRUE(p.Release(0, kT0).ok());
  EXPECT_EQ(p.Poll(kT0), 1);
  ASSERT_TRUE(p.Release(1, kT0).ok());
  EXPECT_FALSE(p.Poll(kT0).has_value());  // 2's turn, it has not asked
  ASSERT_TRUE(p.Request(0, 0).ok());
  EXPECT_FALSE(p.Poll(kT0).has_value());  // 0 must wait for 2
  ASSERT_TRUE(p.Request(2, 0).ok());
  EXPECT_EQ(p.Poll(kT0), 2);
  ASSERT_TRUE(p.Release(2, kT0).ok());
  EXPECT_EQ(p.Poll(kT0), 0);  // around the ring
  EXPECT_EQ(p.grants(), 4);
}

// First-come order: the free slot goes to the earliest request, whatever its place in the ring;
// still one holder at a time, and the gap holds.
TEST(SlotPlannerTest, FirstComeGrantsTheEarliestRequest) {
  SlotPlanner p(/*headroom=*/2.0, /*smoothing=*/1.0, SlotOrder::kFirstCome);
  p.SetMembers({0, 1, 2, 3});
  ASSERT_TRUE(p.Request(2, 0.080).ok());  // gap 10 ms
  ASSERT_TRUE(p.Request(0, 0.080).ok());
  EXPECT_EQ(p.Poll(kT0), 2);              // not 0, whose turn the ring would say it is
  ASSERT_TRUE(p.Request(3, 0.080).ok());
  EXPECT_FALSE(p.Poll(kT0 + absl::Milliseconds(20)).has_value());  // 2 holds it
  ASSERT_TRUE(p.Release(2, kT0 + absl::Milliseconds(1)).ok());
  EXPECT_EQ(p.NextWakeup(), kT0 + absl::Milliseconds(10));
  EXPECT_FALSE(p.Poll(kT0 + absl::Milliseconds(5)).has_value());   // the gap
  EXPECT_EQ(p.Poll(kT0 + absl::Milliseconds(10)), 0);
  ASSERT_TRUE(p.Release(0, kT0 + absl::Milliseconds(11)).ok());
  p.Remove(3);  // a waiting worker that dies gives up its place
  EXPECT_FALSE(p.Poll(kT0 + absl::Milliseconds(30)).has_value());
  EXPECT_EQ(p.NextWakeup(), absl::InfiniteFuture());
  ASSERT_TRUE(p.Request(1, 0.080).ok());
  EXPECT_EQ(p.Poll(kT0 + absl::Milliseconds(30)), 1);
  EXPECT_EQ(p.grants(), 3);
}

// A wider slot: up to `width` hold it at once, still in ring order and the gap apart; a
// release says the width its grant was made at; a narrower width lets holders finish.
TEST(SlotPlannerTest, UpToWidthHoldTheSlotAtOnce) {
  SlotPlanner p(/*headroom=*/2.0, /*smoothing=*/1.0);
  p.SetMembers({0, 1, 2, 3});
  p.set_width(2);
  for (int rank : {3, 2, 1, 0}) ASSERT_TRUE(p.Request(rank, 0.080).ok());  // gap 10 ms
  EXPECT_EQ(p.Poll(kT0), 0);
  EXPECT_FALSE(p.Poll(kT0 + absl::Milliseconds(5)).has_value());  // the gap
  EXPECT_EQ(p.Poll(kT0 + absl::Milliseconds(10)), 1);             // 0 still holds
  EXPECT_EQ(p.holders(), 2);
  EXPECT_TRUE(p.Holds(0) && p.Holds(1));
  EXPECT_FALSE(p.Poll(kT0 + absl::Milliseconds(30)).has_value());  // two hold it
  EXPECT_EQ(p.NextWakeup(), absl::InfiniteFuture());
  EXPECT_EQ(p.Release(1, kT0 + absl::Milliseconds(31)).value(), 2);  // out of order is fine
  EXPECT_EQ(p.Poll(kT0 + absl::Milliseconds(31)), 2);
  p.set_width(1);  // narrower: 0 and 2 keep theirs, 3 waits until one of them is left
  EXPECT_FALSE(p.Poll(kT0 + absl::Milliseconds(50)).has_value());
  EXPECT_EQ(p.Release(0, kT0 + absl::Milliseconds(50)).value(), 2);
  EXPECT_FALSE(p.Poll(kT0 + absl::Milliseconds(50)).has_value());
  EXPECT_EQ(p.Release(2, kT0 + absl::Milliseconds(51)).value(), 2);
  EXPECT_EQ(p.Poll(kT0 + absl::Milliseconds(51)), 3);
  EXPECT_EQ(p.Release(3, kT0 + absl::Milliseconds(52)).value(), 1);
  EXPECT_FALSE(p.Release(3, kT0 + absl::Milliseconds(52)).ok());  // released already
  EXPECT_EQ(p.grants(), 4);
  EXPECT_EQ(p.grants_by_width(), (std::vector<int64_t>{0, 1, 3}));
}

TEST(SlotPlannerTest, SuccessiveGrantsAreAtLeastTheGapApart) {
  // T = 80 ms of compute, h = 2, W = 4: gap = 10 ms.
  SlotPlanner p(2.0, 1.0);
  p.SetMembers({0, 1, 2, 3});
  ASSERT_TRUE(p.Request(0, 0.080).ok());
  EXPECT_EQ(p.gap(), absl::Milliseconds(10));
  EXPECT_EQ(p.Poll(kT0), 0);
  ASSERT_TRUE(p.Release(0, kT0 + absl::Milliseconds(2)).ok());
  ASSERT_TRUE(p.Request(1, 0.080).ok());
  EXPECT_EQ(p.NextWakeup(), kT0 + absl::Milliseconds(10));
  EXPECT_FALSE(p.Poll(kT0 + absl::Milliseconds(9)).has_value());
  EXPECT_EQ(p.Poll(kT0 + absl::Milliseconds(10)), 1);
  EXPECT_EQ(p.NextWakeup(), absl::InfiniteFuture());  // held
}

// T = 480 ms, h = 1.2, W = 4: the paper's gap is 100 ms. With a hold multiple of 2 a push that
// holds the slot 10 ms caps it at 20 ms once a release has measured one, and the next grant
// comes 20 ms after the previous one, not 100; holds of 70 ms would cap it at 140 ms, above 100,
// so the paper's gap stands. The holds are smoothed as compute is.
TEST(SlotPlannerTest, TheGapIsAtMostAMultipleOfTheHold) {
  SlotPlanner p(/*headroom=*/1.2, /*smoothing=*/0.5, SlotOrder::kRing, /*hold_multiple=*/2);
  p.SetMembers({0, 1, 2, 3});
  ASSERT_TRUE(p.Request(0, 0.480).ok());
  ASSERT_TRUE(p.Request(1, 0.480).ok());
  EXPECT_EQ(p.gap(), absl::Seconds(0.480 / (1.2 * 4)));  // no hold measured yet
  EXPECT_EQ(p.Poll(kT0), 0);
  ASSERT_TRUE(p.Release(0, kT0 + absl::Milliseconds(10)).ok());
  EXPECT_EQ(p.mean_hold(), absl::Milliseconds(10));
  EXPECT_EQ(p.gap(), absl::Milliseconds(20));
  EXPECT_EQ(p.NextWakeup(), kT0 + absl::Milliseconds(20));
  EXPECT_FALSE(p.Poll(kT0 + absl::Milliseconds(19)).has_value());
  EXPECT_EQ(p.Poll(kT0 + absl::Milliseconds(20)), 1);
  ASSERT_TRUE(p.Release(1, kT0 + absl::Milliseconds(150)).ok());  // held 130 ms
  EXPECT_EQ(p.mean_hold(), absl::Milliseconds(70));                // 0.5 * 10 + 0.5 * 130
  EXPECT_EQ(p.gap(), absl::Seconds(0.480 / (1.2 * 4)));
  // Without a multiple (0, the default) the gap is the paper's whatever the holds.
  SlotPlanner paper(1.2, 0.5);
  paper.SetMembers({0, 1, 2, 3});
  ASSERT_TRUE(paper.Request(0, 0.480).ok());
  EXPECT_EQ(paper.Poll(kT0), 0);
  ASSERT_TRUE(paper.Release(0, kT0 + absl::Milliseconds(10)).ok());
  EXPECT_EQ(paper.gap(), absl::Seconds(0.480 / (1.2 * 4)));
}

TEST(SlotPlannerTest, ComputeTimeIsSmoothed) {
  SlotPlanner p(1.0, 0.5);
  p.SetMembers({0, 1});
  ASSERT_TRUE(p.Request(0, 0.100).ok());
  ASSERT_TRUE(p.Request(1, 0.300).ok());
  // T = 0.5 * 0.1 + 0.5 * 0.3 = 0.2 s; the gap is T / (1 * 2).
  EXPECT_EQ(p.gap(), absl::Seconds((0.5 * 0.1 + 0.5 * 0.3) / (1.0 * 2)));
  EXPECT_EQ(p.gap(), absl::Milliseconds(100));
  EXPECT_FALSE(p.Request(0, 0.1).ok());                  // already waiting
  EXPECT_FALSE(p.Request(7, 0.1).ok());                  // not in the ring
}

TEST(SlotPlannerTest, DeadOrFinishedWorkersLeaveTheRing) {
  SlotPlanner p(1.0, 1.0);
  p.SetMembers({0, 1, 2, 3});
  ASSERT_TRUE(p.Request(0, 0).ok());
  EXPECT_EQ(p.Poll(kT0), 0);
  p.Remove(0);  // the holder dies: the slot is free, the turn stays with 1
  ASSERT_TRUE(p.Request(2, 0).ok());
  EXPECT_FALSE(p.Poll(kT0).has_value());
  p.Remove(1);  // 1 dies before asking: 2's turn now
  EXPECT_EQ(p.Poll(kT0), 2);
  ASSERT_TRUE(p.Release(2, kT0).ok());
  EXPECT_EQ(p.ring(), (std::vector<int>{2, 3}));
  ASSERT_TRUE(p.Request(3, 0).ok());
  EXPECT_EQ(p.Poll(kT0), 3);
  ASSERT_TRUE(p.Release(3, kT0).ok());
  p.Remove(3);  // removing the member before the turn keeps the turn on 2
  ASSERT_TRUE(p.Request(2, 0).ok());
  EXPECT_EQ(p.Poll(kT0), 2);
  p.Remove(42);  // unknown: ignored
  p.SetMembers({5, 4});  // rebuilt (a worker joined): starts at the lowest rank
  EXPECT_EQ(p.holders(), 0);
  ASSERT_TRUE(p.Request(5, 0).ok());
  EXPECT_FALSE(p.Poll(kT0).has_value());
  ASSERT_TRUE(p.Request(4, 0).ok());
  EXPECT_EQ(p.Poll(kT0), 4);
}

// T = 120 ms, h = 1, W = 4: gap 30 ms. Workers that finish leave the ring but keep counting in
// W, so the last ones of a job do not wait longer and longer for their final slots; a dead one
// no longer counts, and the survivors spread out over the cycle.
TEST(SlotPlannerTest, FinishedWorkersStillCountInTheGap) {
  SlotPlanner p(1.0, 1.0);
  p.SetMembers({0, 1, 2, 3});
  ASSERT_TRUE(p.Request(0, 0.120).ok());
  EXPECT_EQ(p.gap(), absl::Milliseconds(30));
  EXPECT_EQ(p.Poll(kT0), 0);
  ASSERT_TRUE(p.Release(0, kT0).ok());
  p.Remove(0, /*finished=*/true);
  p.Remove(1, /*finished=*/true);
  EXPECT_EQ(p.ring(), (std::vector<int>{2, 3}));
  EXPECT_EQ(p.gap(), absl::Milliseconds(30));
  ASSERT_TRUE(p.Request(2, 0.120).ok());
  EXPECT_EQ(p.NextWakeup(), kT0 + absl::Milliseconds(30));
  p.Remove(3);  // dies: W = 1 in the ring + 2 finished
  EXPECT_EQ(p.gap(), absl::Milliseconds(40));
  p.SetMembers({2, 3});  // rebuilt: the finished ones are forgotten
  EXPECT_EQ(p.gap(), absl::Milliseconds(60));
}

TEST(SlotPlannerTest, JoiningWorkerEntersTheRingWithoutChangingTheTurn) {
  SlotPlanner p(1.0, 1.0);
  p.SetMembers({0, 2});
  ASSERT_TRUE(p.Request(0, 0).ok());
  EXPECT_EQ(p.Poll(kT0), 0);
  ASSERT_TRUE(p.Release(0, kT0).ok());  // 2's turn
  p.Add(1);                              // joins before 2 in rank order
  EXPECT_EQ(p.ring(), (std::vector<int>{0, 1, 2}));
  ASSERT_TRUE(p.Request(1, 0).ok());
  EXPECT_FALSE(p.Poll(kT0).has_value());  // still 2's turn
  ASSERT_TRUE(p.Request(2, 0).ok());
  EXPECT_EQ(p.Poll(kT0), 2);
  ASSERT_TRUE(p.Release(2, kT0).ok());
  ASSERT_TRUE(p.Request(0, 0).ok());
  EXPECT_EQ(p.Poll(kT0), 0);  // then 0, and 1 after it
  ASSERT_TRUE(p.Release(0, kT0).ok());
  EXPECT_EQ(p.Poll(kT0), 1);
  p.Add(1);  // already in: ignored
  EXPECT_EQ(p.ring().size(), 3u);
}

}  // namespace
}  // namespace r2sp
