// fp16 conversion: known values at every boundary (rounding ties, overflow, subnormals, signed
// zeros, Inf, NaN), every CPU path against the scalar reference on all 2^16 halves and on a
// stratified 2^22-value subset of the fp32 bit patterns (every sign/exponent/top-mantissa
// combination with the low bits at and around each rounding boundary), which name the first
// failing value. fp16_exhaustive_test checks all 2^32.
#include "common/codec/fp16.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace r2sp::codec {
namespace {

float Bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof(f));
  return f;
}

uint32_t BitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

TEST(Fp16Test, KnownValues) {
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);                   // the largest finite half
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);                   // below the tie: stays finite
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);                   // the tie rounds to even: Inf
  EXPECT_EQ(FloatToHalf(1e10f), 0x7c00);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);      // the smallest normal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);      // the smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);      // half of it: tie to even (0)
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002);      // 1.5 units: tie to even (2)
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25) * 1.0001f), 0x0001);  // just above the tie
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);     // tie between 1 and next
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(3.0f, -11)), 0x3c02);     // tie, odd below: up
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::denorm_min()), 0x8000);
  const uint16_t nan = FloatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_EQ(FloatToHalf(Bits(0x7f800001u)), 0x7e00);  // a signalling NaN comes out quiet

  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(BitsOf(HalfToFloat(0x8000)), 0x80000000u);
  EXPECT_TRUE(std::isinf(HalfToFloat(0x7c00)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7c01)));
}

TEST(Fp16Test, EveryHalfDecodesExactlyAndRoundTrips) {
  std::vector<uint16_t> halves(1 << 16);
  for (uint32_t h = 0; h < halves.size(); ++h) halves[h] = static_cast<uint16_t>(h);
  for (Fp16Path path : AvailableFp16Paths()) {
    std::vector<float> decoded(halves.size());
    DecodeFp16With(path, halves.data(), halves.size(), decoded.data());
    for (uint32_t h = 0; h < halves.size(); ++h) {
      ASSERT_EQ(BitsOf(decoded[h]), BitsOf(HalfToFloat(halves[h])))
          << Fp16PathName(path) << " half " << h;
      const uint16_t back = FloatToHalf(decoded[h]);
      if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0) {
        ASSERT_EQ(back, h | 0x200) << h;  // NaN: quietened, payload kept
      } else {
        ASSERT_EQ(back, h) << h;
      }
    }
  }
}

TEST(Fp16Test, EveryPathMatchesTheReferenceOnAStratifiedSubset) {
  // The top 16 bits (sign, exponent, top 7 mantissa bits) take every value; the low 16 bits
  // take the values at and around the rounding boundaries of normal halves, and a few others.
  const uint32_t lows[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x2001,
                           0x3000, 0x5555, 0x7fff, 0x8000, 0x9000, 0xafff, 0xf000, 0xffff};
  const uint32_t highs_per_low = 1 << 16;
  std::vector<float> in;
  in.reserve(highs_per_low * (sizeof(lows) / sizeof(lows[0])) * 4);
  for (uint32_t high = 0; high < highs_per_low; ++high) {
    for (uint32_t low : lows) in.push_back(Bits((high << 16) | low));
    // Subnormal halves round on higher bits: add values near those boundaries too.
    for (uint32_t k = 1; k <= 3; ++k) in.push_back(Bits((high << 16) | ((k * 0x4000) & 0xffff)));
  }
  std::vector<uint16_t> want(in.size()), got(in.size());
  for (size_t i = 0; i < in.size(); ++i) want[i] = FloatToHalf(in[i]);
  for (Fp16Path path : AvailableFp16Paths()) {
    EncodeFp16With(path, in.data(), in.size(), got.data());
    for (size_t i = 0; i < in.size(); ++i) {
      ASSERT_EQ(got[i], want[i]) << Fp16PathName(path) << " float bits " << std::hex
                                 << BitsOf(in[i]);
    }
  }
}

TEST(Fp16Test, BulkCallsHandleEveryLengthAndTail) {
  std::vector<float> in(67);
  for (size_t i = 0; i < in.size(); ++i) in[i] = 0.37f * static_cast<float>(i) - 11.0f;
  for (Fp16Path path : AvailableFp16Paths()) {
    for (size_t n = 0; n <= in.size(); ++n) {
      std::vector<uint16_t> half(n + 1, 0xabcd);
      EncodeFp16With(path, in.data(), n, half.data());
      EXPECT_EQ(half[n], 0xabcd) << "wrote past the end";
      std::vector<float> out(n + 1, -7.0f);
      DecodeFp16With(path, half.data(), n, out.data());
      EXPECT_EQ(out[n], -7.0f) << "wrote past the end";
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(half[i], FloatToHalf(in[i]));
        ASSERT_EQ(out[i], HalfToFloat(half[i]));
      }
    }
  }
}

// Found by tests/fuzz (push_decoder, pull_decoder, codec): a frame received without a copy may
// start at an odd address, and the scalar path read it as uint16_t (misaligned loads are
// undefined behaviour; UBSan reports them under --config=asan).
TEST(Fp16Test, DecodesFromAnOddAddressOnEveryPath) {
  const std::vector<float> values = {1.0f, -2.5f, 0.0f, 65504.0f, 3.0f, 6e-5f, -1e-7f, 7.0f, 9.5f};
  std::vector<uint16_t> half(values.size());
  EncodeFp16(values.data(), values.size(), half.data());
  std::vector<char> bytes(half.size() * sizeof(uint16_t) + 1);
  std::memcpy(bytes.data() + 1, half.data(), half.size() * sizeof(uint16_t));
  const uint16_t* odd = reinterpret_cast<const uint16_t*>(bytes.data() + 1);
  for (Fp16Path path : AvailableFp16Paths()) {
    std::vector<float> out(values.size());
    DecodeFp16With(path, odd, values.size(), out.data());
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ(out[i], HalfToFloat(half[i])) << Fp16PathName(path) << " value " << i;
    }
  }
}

}  // namespace
}  // namespace r2sp::codec
