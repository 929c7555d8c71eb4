// fp16 conversion against an independent reference written here from IEEE 754's definition
// (exact double arithmetic and the C library's round-to-nearest-even, no bit tricks shared with
// common/codec/fp16.cc): all 2^16 halves decoded, and encoding of every rounding boundary (each
// half, each midpoint between neighbours and the floats either side of it) plus a dense sweep of
// float bit patterns, on every path this CPU has (scalar included). Then every one of the 2^32
// floats through the hardware paths (F16C, AVX-512) against the scalar path, on all cores.
// About 20 s on 2 idle cores (compiled -O3 in any build).
#include <algorithm>
#include <atomic>
#include <cfenv>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "common/codec/fp16.h"
#include "gtest/gtest.h"

namespace r2sp::codec {
namespace {

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof(f));
  return f;
}

// binary16: sign, 5 exponent bits (bias 15), 10 fraction bits. Returns the float's bits.
uint32_t ReferenceDecode(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1u;
  const int exponent = (h >> 10) & 0x1f;
  const uint32_t fraction = h & 0x3ffu;
  if (exponent == 0x1f) {  // Inf; NaN quiet, its payload in the top fraction bits
    return (sign << 31) | 0x7f800000u | (fraction == 0 ? 0 : 0x400000u | (fraction << 13));
  }
  const double magnitude = exponent == 0 ? std::ldexp(static_cast<double>(fraction), -24)
                                         : std::ldexp(1024.0 + fraction, exponent - 25);
  return Bits(static_cast<float>(sign ? -magnitude : magnitude));
}

// Rounds to the nearest binary16, ties to even; overflow to Inf; NaN quiet with its top 9
// payload bits (as F16C).
uint16_t ReferenceEncode(float f) {
  const uint16_t sign = (Bits(f) >> 31) ? 0x8000u : 0u;
  if (std::isnan(f)) return sign | 0x7e00u | ((Bits(f) & 0x7fffffu) >> 13);
  const double a = std::fabs(static_cast<double>(f));
  // 65504 is the largest half; the next step would be 65536, so the midpoint 65520 and above
  // round away (65504's last fraction bit is odd: the tie goes up too).
  if (a >= 65520.0) return sign | 0x7c00u;
  int k;
  std::frexp(a, &k);  // a = m * 2^k, m in [0.5, 1): a's binade is 2^(k-1)
  const int quantum_exponent = std::max(k - 1, -14) - 10;  // subnormals: steps of 2^-24
  const double steps = std::nearbyint(std::ldexp(a, -quantum_exponent));  // ties to even
  const double value = std::ldexp(steps, quantum_exponent);
  if (value < std::ldexp(1.0, -14)) return sign | static_cast<uint16_t>(steps);  // subnormal
  std::frexp(value, &k);
  const int exponent = k - 1;
  const uint32_t fraction = static_cast<uint32_t>(std::ldexp(value, -exponent) * 1024.0) - 1024;
  return sign | static_cast<uint16_t>(((exponent + 15) << 10) | fraction);
}

TEST(Fp16ReferenceTest, TheReferenceKnowsTheLandmarks) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  EXPECT_EQ(ReferenceEncode(1.0f), 0x3c00u);
  EXPECT_EQ(ReferenceEncode(-2.0f), 0xc000u);
  EXPECT_EQ(ReferenceEncode(65504.0f), 0x7bffu);
  EXPECT_EQ(ReferenceEncode(65519.996f), 0x7bffu);
  EXPECT_EQ(ReferenceEncode(65520.0f), 0x7c00u);
  EXPECT_EQ(ReferenceEncode(std::ldexp(1.0f, -24)), 0x0001u);  // smallest subnormal
  EXPECT_EQ(ReferenceEncode(std::ldexp(1.0f, -25)), 0x0000u);  // its half: ties to even 0
  EXPECT_EQ(ReferenceEncode(std::ldexp(1.5f, -24)), 0x0002u);  // 1.5 steps: to even 2
  EXPECT_EQ(ReferenceEncode(1.0f + std::ldexp(1.0f, -11)), 0x3c00u);  // tie: to even
  EXPECT_EQ(ReferenceEncode(1.0f + std::ldexp(3.0f, -11)), 0x3c02u);  // tie: to even
  EXPECT_EQ(ReferenceEncode(-0.0f), 0x8000u);
  EXPECT_EQ(ReferenceDecode(0x3555u), Bits(0.333251953125f));
  EXPECT_EQ(ReferenceDecode(0x0001u), Bits(std::ldexp(1.0f, -24)));
  EXPECT_EQ(ReferenceDecode(0xfc00u), Bits(-INFINITY));
  EXPECT_EQ(ReferenceDecode(0x7d01u), 0x7fe02000u);  // signalling NaN made quiet
}

TEST(Fp16ExhaustiveTest, EveryHalfDecodesExactlyOnEveryPath) {
  std::vector<uint16_t> halves(1 << 16);
  for (uint32_t h = 0; h < halves.size(); ++h) halves[h] = static_cast<uint16_t>(h);
  std::vector<float> got(halves.size());
  for (Fp16Path path : AvailableFp16Paths()) {
    DecodeFp16With(path, halves.data(), halves.size(), got.data());
    int mismatches = 0;
    for (uint32_t h = 0; h < halves.size(); ++h) {
      const uint32_t want = ReferenceDecode(static_cast<uint16_t>(h));
      if (Bits(got[h]) != want && ++mismatches <= 5) {
        ADD_FAILURE() << Fp16PathName(path) << ": half 0x" << std::hex << h << " gave 0x"
                      << Bits(got[h]) << ", want 0x" << want;
      }
      if (path == Fp16Path::kScalar && Bits(HalfToFloat(static_cast<uint16_t>(h))) != want) {
        ++mismatches;
      }
    }
    EXPECT_EQ(mismatches, 0) << Fp16PathName(path);
  }
}

// Every half, every midpoint between neighbours and the floats either side of each, with both
// signs; then every 61st float bit pattern.
std::vector<float> EncodingInputs() {
  std::vector<float> in;
  for (uint16_t h = 0; h < 0x7c00u; ++h) {
    const float low = FromBits(ReferenceDecode(h));
    const float high = h + 1 < 0x7c00u ? FromBits(ReferenceDecode(h + 1)) : 65536.0f;
    const float mid = low + (high - low) / 2;  // exact: one more bit than a half has
    for (float f : {low, std::nextafter(mid, 0.0f), mid, std::nextafter(mid, INFINITY)}) {
      in.push_back(f);
      in.push_back(-f);
    }
  }
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 61) in.push_back(FromBits(b));
  return in;
}

TEST(Fp16ExhaustiveTest, EncodingMatchesTheDefinitionOnEveryPath) {
  const std::vector<float> in = EncodingInputs();
  std::vector<uint16_t> want(in.size()), got(in.size());
  for (size_t i = 0; i < in.size(); ++i) want[i] = ReferenceEncode(in[i]);
  for (Fp16Path path : AvailableFp16Paths()) {
    EncodeFp16With(path, in.data(), in.size(), got.data());
    int mismatches = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      const uint16_t scalar = path == Fp16Path::kScalar ? FloatToHalf(in[i]) : got[i];
      if ((got[i] != want[i] || scalar != want[i]) && ++mismatches <= 5) {
        ADD_FAILURE() << Fp16PathName(path) << ": float 0x" << std::hex << Bits(in[i])
                      << " gave 0x" << got[i] << ", want 0x" << want[i];
      }
    }
    EXPECT_EQ(mismatches, 0) << Fp16PathName(path);
  }
}

TEST(Fp16ExhaustiveTest, EveryFloatGivesTheSameHalfOnEveryPath) {
  constexpr uint64_t kTotal = uint64_t{1} << 32;
  constexpr uint64_t kChunk = uint64_t{1} << 20;
  const std::vector<Fp16Path> paths = AvailableFp16Paths();
  std::atomic<uint64_t> next{0}, mismatches{0};
  auto work = [&] {
    std::vector<float> in(kChunk);
    std::vector<uint16_t> want(kChunk), got(kChunk);
    for (uint64_t start; (start = next.fetch_add(kChunk)) < kTotal;) {
      for (uint64_t i = 0; i < kChunk; ++i) in[i] = FromBits(static_cast<uint32_t>(start + i));
      EncodeFp16With(Fp16Path::kScalar, in.data(), kChunk, want.data());
      for (Fp16Path path : paths) {
        if (path == Fp16Path::kScalar) continue;
        EncodeFp16With(path, in.data(), kChunk, got.data());
        if (!std::equal(got.begin(), got.end(), want.begin())) mismatches.fetch_add(1);
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < std::max(1u, std::thread::hardware_concurrency()); ++t) {
    threads.emplace_back(work);
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0u) << "chunks where a hardware path differs from the scalar one";
}

}  // namespace
}  // namespace r2sp::codec
