// See fp16.h.
#include "common/codec/fp16.h"

#include <cpuid.h>
#include <immintrin.h>

#include <cstring>

#include "glog/logging.h"

namespace r2sp::codec {
namespace {

// Rounds q + rem/2^shift to the nearest integer, ties to even.
inline uint32_t RoundNearestEven(uint32_t q, uint32_t rem, int shift) {
  const uint32_t half = 1u << (shift - 1);
  return q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
}

void EncodeScalar(const float* in, size_t n, uint16_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = FloatToHalf(in[i]);
}

// `in` may be unaligned (a received frame's bytes): each value is read with memcpy.
void DecodeScalar(const uint16_t* in, size_t n, float* out) {
  const char* bytes = reinterpret_cast<const char*>(in);
  for (size_t i = 0; i < n; ++i) {
    uint16_t half;
    std::memcpy(&half, bytes + i * sizeof(half), sizeof(half));
    out[i] = HalfToFloat(half);
  }
}

__attribute__((target("avx,f16c"))) void EncodeF16c(const float* in, size_t n, uint16_t* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  EncodeScalar(in + i, n - i, out + i);
}

__attribute__((target("avx,f16c"))) void DecodeF16c(const uint16_t* in, size_t n, float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  DecodeScalar(in + i, n - i, out + i);
}

__attribute__((target("avx512f"))) void EncodeAvx512(const float* in, size_t n, uint16_t* out) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), h);
  }
  EncodeScalar(in + i, n - i, out + i);
}

__attribute__((target("avx512f"))) void DecodeAvx512(const uint16_t* in, size_t n, float* out) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    _mm512_storeu_ps(out + i, _mm512_cvtph_ps(h));
  }
  DecodeScalar(in + i, n - i, out + i);
}

// CPUID.1:ECX.F16C. (Clang's __builtin_cpu_supports does not know "f16c".)
bool HasF16c() {
  unsigned eax, ebx, ecx, edx;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}

Fp16Path BestPath() {
  static const Fp16Path best = AvailableFp16Paths().back();
  return best;
}

}  // namespace

uint16_t FloatToHalf(float value) {
  uint32_t x;
  std::memcpy(&x, &value, sizeof(x));
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t exponent = (x >> 23) & 0xffu;
  const uint32_t mantissa = x & 0x7fffffu;
  if (exponent == 0xff) {  // Inf, or NaN made quiet with its top 9 payload bits kept
    return sign | (mantissa == 0 ? 0x7c00u : 0x7e00u | (mantissa >> 13));
  }
  const int e = static_cast<int>(exponent) - 127 + 15;  // the fp16 exponent field
  if (e >= 31) return sign | 0x7c00u;                   // too large: Inf
  if (e >= 1) {  // normal: 10 of the 23 mantissa bits; a carry may reach Inf, as it should
    const uint32_t q = (static_cast<uint32_t>(e) << 10) | (mantissa >> 13);
    return sign | static_cast<uint16_t>(RoundNearestEven(q, mantissa & 0x1fffu, 13));
  }
  // Subnormal fp16 (units of 2^-24): the 24-bit significand shifted right by 14 - e.
  const int shift = 14 - e;
  if (shift > 24) return sign;  // below half the smallest subnormal (and fp32 subnormals)
  const uint32_t significand = mantissa | 0x800000u;
  const uint32_t q = significand >> shift;
  return sign |
         static_cast<uint16_t>(RoundNearestEven(q, significand & ((1u << shift) - 1), shift));
}

float HalfToFloat(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1fu;
  uint32_t mantissa = half & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {  // Inf, or NaN (quiet)
    bits = sign | 0x7f800000u | (mantissa == 0 ? 0 : (mantissa | 0x200u) << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    int e = 127 - 14;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --e;
    }
    bits = sign | (static_cast<uint32_t>(e) << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

const char* Fp16PathName(Fp16Path path) {
  switch (path) {
    case Fp16Path::kScalar:
      return "scalar";
    case Fp16Path::kF16c:
      return "f16c";
    case Fp16Path::kAvx512:
      return "avx512";
  }
  return "?";
}

std::vector<Fp16Path> AvailableFp16Paths() {
  std::vector<Fp16Path> paths = {Fp16Path::kScalar};
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx") && HasF16c()) {
    paths.push_back(Fp16Path::kF16c);
  }
  if (__builtin_cpu_supports("avx512f")) paths.push_back(Fp16Path::kAvx512);
  return paths;
}

void EncodeFp16With(Fp16Path path, const float* in, size_t n, uint16_t* out) {
  switch (path) {
    case Fp16Path::kScalar:
      return EncodeScalar(in, n, out);
    case Fp16Path::kF16c:
      return EncodeF16c(in, n, out);
    case Fp16Path::kAvx512:
      return EncodeAvx512(in, n, out);
  }
  LOG(FATAL) << "unknown fp16 path";
}

void DecodeFp16With(Fp16Path path, const uint16_t* in, size_t n, float* out) {
  switch (path) {
    case Fp16Path::kScalar:
      return DecodeScalar(in, n, out);
    case Fp16Path::kF16c:
      return DecodeF16c(in, n, out);
    case Fp16Path::kAvx512:
      return DecodeAvx512(in, n, out);
  }
  LOG(FATAL) << "unknown fp16 path";
}

void EncodeFp16(const float* in, size_t n, uint16_t* out) {
  EncodeFp16With(BestPath(), in, n, out);
}

void DecodeFp16(const uint16_t* in, size_t n, float* out) {
  DecodeFp16With(BestPath(), in, n, out);
}

}  // namespace r2sp::codec
