// InboundLimit: each process's outstanding requests are bounded on their own, and answers
// free room again.
#include "common/inbound_limit.h"

#include "gtest/gtest.h"

namespace r2sp {
namespace {

TEST(InboundLimitTest, EachProcessIsBoundedOnItsOwn) {
  InboundLimit limit(2);
  EXPECT_TRUE(limit.Take("a"));
  EXPECT_TRUE(limit.Take("a"));
  EXPECT_FALSE(limit.Take("a"));
  EXPECT_TRUE(limit.Take("b"));
  EXPECT_EQ(limit.outstanding("a"), 2);
  EXPECT_EQ(limit.outstanding("b"), 1);
  EXPECT_EQ(limit.taken(), 3u);
  EXPECT_EQ(limit.refused(), 1u);
}

TEST(InboundLimitTest, AnAnswerMakesRoomAndStrayAnswersAreIgnored) {
  InboundLimit limit(1);
  EXPECT_TRUE(limit.Take("a"));
  EXPECT_FALSE(limit.Take("a"));
  limit.Release("a");
  EXPECT_EQ(limit.outstanding("a"), 0);
  limit.Release("a");  // never taken: no credit
  limit.Release("z");
  EXPECT_EQ(limit.outstanding("a"), 0);
  EXPECT_TRUE(limit.Take("a"));
  EXPECT_FALSE(limit.Take("a"));
  EXPECT_EQ(limit.taken(), 2u);
  EXPECT_EQ(limit.refused(), 2u);
}

TEST(InboundLimitTest, ZeroRefusesEverything) {
  InboundLimit limit(0);
  EXPECT_FALSE(limit.Take("a"));
  EXPECT_EQ(limit.outstanding("a"), 0);
  EXPECT_EQ(limit.refused(), 1u);
}

}  // namespace
}  // namespace r2sp
