// Delay compensation: the point a gradient is computed at.
#include "worker/lookahead.h"

#include <vector>

#include "gtest/gtest.h"

namespace r2sp {
namespace {

TEST(LookaheadTest, FirstCallReturnsThePulledParameters) {
  Lookahead lookahead;
  const std::vector<float> p = {1.0f, -2.0f};
  EXPECT_EQ(lookahead.Next(p, 0.75f), p.data());
}

TEST(LookaheadTest, ExtrapolatesAlongTheLastRoundsMovement) {
  Lookahead lookahead;
  lookahead.Next({1.0f, -2.0f, 0.5f}, 0.75f);
  // Moved by (+0.4, -0.8, 0): predicted 3/4 of that further.
  const std::vector<float> p2 = {1.4f, -2.8f, 0.5f};
  const float* x = lookahead.Next(p2, 0.75f);
  EXPECT_FLOAT_EQ(x[0], 1.7f);
  EXPECT_FLOAT_EQ(x[1], -3.4f);
  EXPECT_FLOAT_EQ(x[2], 0.5f);
  // The next call extrapolates from p2, not from the first parameters.
  const std::vector<float> p3 = {1.5f, -2.8f, 0.0f};
  x = lookahead.Next(p3, 0.5f);
  EXPECT_FLOAT_EQ(x[0], 1.55f);
  EXPECT_FLOAT_EQ(x[1], -2.8f);
  EXPECT_FLOAT_EQ(x[2], -0.25f);
}

TEST(LookaheadTest, AlphaZeroIsThePulledPoint) {
  Lookahead lookahead;
  lookahead.Next({1.0f, 2.0f}, 0.0f);
  const std::vector<float> p = {3.0f, 5.0f};
  const float* x = lookahead.Next(p, 0.0f);
  EXPECT_FLOAT_EQ(x[0], 3.0f);
  EXPECT_FLOAT_EQ(x[1], 5.0f);
}

// On a quadratic with a constant drift, the extrapolated point is where the parameters are
// after the other workers' updates.
TEST(LookaheadTest, ExactForConstantVelocity) {
  Lookahead lookahead;
  const float v = -0.1f;  // movement per round
  std::vector<float> p = {0.0f};
  const float* x = nullptr;
  for (int round = 0; round < 5; ++round) {
    x = lookahead.Next(p, 0.75f);
    p[0] += v;
  }
  // x was computed from p = 4v (after round 3); 0.75 of a round later it is 4.75v.
  EXPECT_FLOAT_EQ(*x, 4.75f * v);
}

}  // namespace
}  // namespace r2sp
