// fp16 deltas: the receiver's copy and the sender's shadow stay bit-identical, repeated deltas
// to a fixed target carry the rounding error until the copy reaches it, and deltas binary16
// cannot hold (overflow, NaN) are refused.
#include "common/codec/fp16_delta.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/codec/fp16.h"
#include "gtest/gtest.h"

namespace r2sp::codec {
namespace {

std::vector<float> RandomWeights(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

TEST(Fp16DeltaTest, AddsTheDecodedDeltas) {
  const std::vector<float> deltas = {0.5f, -0.25f, 1e-3f, 0.0f, -0.0f, 65504.0f};
  std::vector<uint16_t> half(deltas.size());
  EncodeFp16(deltas.data(), deltas.size(), half.data());
  std::vector<float> copy = {1, 2, 3, 4, 5, 6};
  AddFp16Deltas(half.data(), half.size(), copy.data());
  for (size_t i = 0; i < copy.size(); ++i) {
    EXPECT_EQ(copy[i], static_cast<float>(i + 1) + HalfToFloat(half[i])) << i;
  }
}

TEST(Fp16DeltaTest, ShadowAndReceiverCopyStayBitIdentical) {
  const size_t n = 5000;  // not a multiple of the block
  std::vector<float> shadow = RandomWeights(n, 1), copy = shadow;
  std::vector<uint16_t> out(n);
  for (uint32_t step = 0; step < 20; ++step) {
    std::vector<float> target = RandomWeights(n, 100 + step);
    for (size_t i = 0; i < n; ++i) target[i] = shadow[i] + 0.01f * target[i];
    const std::vector<float> before = shadow;
    ASSERT_TRUE(EncodeFp16Deltas(target.data(), n, shadow.data(), out.data()));
    AddFp16Deltas(out.data(), n, copy.data());
    ASSERT_EQ(0, std::memcmp(shadow.data(), copy.data(), n * sizeof(float))) << step;
    for (size_t i = 0; i < n; ++i) {
      // Off by binary16's rounding of the change (2^-11 relative, 2^-25 absolute at the
      // smallest) plus fp32's rounding of the sum.
      const float change = std::fabs(target[i] - before[i]);
      ASSERT_NEAR(copy[i], target[i], change / 2048 + 0x1p-25f + 2e-7f * std::fabs(target[i]))
          << i;
    }
  }
}

TEST(Fp16DeltaTest, RoundingErrorIsSentLaterSoTheCopyReachesAFixedTarget) {
  // Weights differ from a copy at 0 by more than fp16 resolves: the first delta is rounded
  // (by up to 2^-11 of the weight), and the following ones send what it dropped until the copy
  // is within fp16's smallest step (2^-24) of the weights, or exact.
  const std::vector<float> target = {1.0001f, -0.3333333f, 0.1234567f, 3.14159265f};
  std::vector<float> shadow(target.size(), 0.0f), copy = shadow;
  std::vector<uint16_t> out(target.size());
  ASSERT_TRUE(EncodeFp16Deltas(target.data(), target.size(), shadow.data(), out.data()));
  AddFp16Deltas(out.data(), out.size(), copy.data());
  EXPECT_GT(std::fabs(copy[0] - target[0]), 1e-5f);  // one fp16 step cannot hold 1.0001
  for (int pull = 0; pull < 4; ++pull) {
    ASSERT_TRUE(EncodeFp16Deltas(target.data(), target.size(), shadow.data(), out.data()));
    AddFp16Deltas(out.data(), out.size(), copy.data());
  }
  EXPECT_EQ(copy, shadow);
  EXPECT_EQ(copy[0], target[0]);  // near 1 and 3.14 fp16's subnormals reach every fp32 step
  EXPECT_EQ(copy[3], target[3]);
  for (size_t i = 0; i < target.size(); ++i) EXPECT_NEAR(copy[i], target[i], 0x1p-25f) << i;
}

TEST(Fp16DeltaTest, RefusesDeltasBinary16CannotHold) {
  std::vector<uint16_t> out(3000);
  std::vector<float> shadow(3000, 0.0f), target(3000, 1.0f);
  target[2500] = 70000.0f;  // overflows binary16, in the second block
  EXPECT_FALSE(EncodeFp16Deltas(target.data(), target.size(), shadow.data(), out.data()));
  shadow.assign(3000, 0.0f);
  target[2500] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(EncodeFp16Deltas(target.data(), target.size(), shadow.data(), out.data()));
  shadow.assign(3000, 0.0f);
  target[2500] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(EncodeFp16Deltas(target.data(), target.size(), shadow.data(), out.data()));
  target[2500] = 65504.0f;  // the largest finite binary16
  shadow.assign(3000, 0.0f);
  EXPECT_TRUE(EncodeFp16Deltas(target.data(), target.size(), shadow.data(), out.data()));
  EXPECT_EQ(shadow[2500], 65504.0f);
}

}  // namespace
}  // namespace r2sp::codec
