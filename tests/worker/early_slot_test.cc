// When r2sp with --overlap asks for its slot (worker/early_slot.h): one smoothed push before
// the compute's predicted end, never before it starts, and never without a prediction. The
// asking itself runs against the real scheduler in exchanger_test.
#include "worker/early_slot.h"

#include "gtest/gtest.h"

namespace r2sp {
namespace {

TEST(EarlyAskTimeTest, OnePushBeforeThePredictedEndOfCompute) {
  const absl::Time start = absl::FromUnixSeconds(1000);
  EXPECT_EQ(EarlyAskTime(start, 2.0, 0.25), start + absl::Milliseconds(1750));
  EXPECT_EQ(EarlyAskTime(start, 2.0, 0.0), start + absl::Seconds(2));
}

TEST(EarlyAskTimeTest, APushLongerThanTheComputeAsksAtTheStart) {
  const absl::Time start = absl::FromUnixSeconds(1000);
  EXPECT_EQ(EarlyAskTime(start, 0.1, 0.5), start);
  EXPECT_EQ(EarlyAskTime(start, 0.1, -1.0), start + absl::Milliseconds(100));
}

TEST(EarlyAskTimeTest, WithoutAPredictionNeverEarly) {
  const absl::Time start = absl::FromUnixSeconds(1000);
  EXPECT_EQ(EarlyAskTime(start, 0.0, 0.5), absl::InfiniteFuture());
  EXPECT_EQ(EarlyAskTime(start, -1.0, 0.5), absl::InfiniteFuture());
}

}  // namespace
}  // namespace r2sp
