// The BSP aggregation rule: one gradient per live worker per clock, summed.
#include "server/clock_aggregator.h"

#include <vector>

#include "gtest/gtest.h"

namespace r2sp {
namespace {

TEST(ClockAggregatorTest, SumsOneGradientPerWorkerPerClock) {
  ClockAggregator agg(3, 3);
  const std::vector<bool> live = {true, true, true};
  const float g0[] = {1, 2, 3}, g1[] = {10, 20, 30}, g2[] = {100, 200, 300};
  EXPECT_FALSE(agg.Complete(live));
  ASSERT_TRUE(agg.Add(1, 0, g1).ok());
  ASSERT_TRUE(agg.Add(0, 0, g0).ok());
  EXPECT_FALSE(agg.Complete(live));
  ASSERT_TRUE(agg.Add(2, 0, g2).ok());
  EXPECT_TRUE(agg.Complete(live));
  EXPECT_EQ(agg.contributors(), 3);
  EXPECT_EQ(std::vector<float>(agg.sum(), agg.sum() + 3), (std::vector<float>{111, 222, 333}));
  agg.Advance();
  EXPECT_EQ(agg.clock(), 1);
  EXPECT_FALSE(agg.Complete(live));
  ASSERT_TRUE(agg.Add(2, 1, g0).ok());
  EXPECT_EQ(std::vector<float>(agg.sum(), agg.sum() + 3), (std::vector<float>{1, 2, 3}));
}

TEST(ClockAggregatorTest, RejectsDuplicatesWrongClocksAndRanks) {
  ClockAggregator agg(1, 2);
  const float g = 1;
  ASSERT_TRUE(agg.Add(0, 0, &g).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(agg.Add(0, 0, &g)));
  EXPECT_TRUE(absl::IsFailedPrecondition(agg.Add(1, 1, &g)));
  EXPECT_TRUE(absl::IsInvalidArgument(agg.Add(2, 0, &g)));
  EXPECT_TRUE(absl::IsInvalidArgument(agg.Add(-1, 0, &g)));
  EXPECT_EQ(agg.contributors(), 1);
  EXPECT_EQ(agg.sum()[0], 1.0f);
}

TEST(ClockAggregatorTest, CompletesWithoutDeadWorkers) {
  ClockAggregator agg(1, 3);
  const float g = 2;
  ASSERT_TRUE(agg.Add(0, 0, &g).ok());
  ASSERT_TRUE(agg.Add(2, 0, &g).ok());
  EXPECT_FALSE(agg.Complete({true, true, true}));
  EXPECT_TRUE(agg.Complete({true, false, true}));  // worker 1 died
  EXPECT_EQ(agg.contributors(), 2);
}

// A worker that joined takes part from its join clock on: earlier clocks complete without it,
// later ones wait for it.
TEST(ClockAggregatorTest, AJoinedWorkerTakesPartFromItsJoinClock) {
  ClockAggregator agg(1, 2);
  agg.AddWorkers(3);
  agg.AddWorkers(1);  // never fewer
  const std::vector<bool> live = {true, true, true};
  const std::vector<int64_t> joined_at = {0, 0, 1};
  const float g = 1;
  ASSERT_TRUE(agg.Add(0, 0, &g).ok());
  ASSERT_TRUE(agg.Add(1, 0, &g).ok());
  EXPECT_FALSE(agg.Complete(live));
  EXPECT_TRUE(agg.Complete(live, joined_at));
  agg.Advance();
  ASSERT_TRUE(agg.Add(0, 1, &g).ok());
  ASSERT_TRUE(agg.Add(1, 1, &g).ok());
  EXPECT_FALSE(agg.Complete(live, joined_at));
  ASSERT_TRUE(agg.Add(2, 1, &g).ok());
  EXPECT_TRUE(agg.Complete(live, joined_at));
  EXPECT_EQ(agg.contributors(), 3);
}

}  // namespace
}  // namespace r2sp
