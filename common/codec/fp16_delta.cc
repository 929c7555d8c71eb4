// fp16 deltas, block by block so each block's differences stay in L1 between the passes.
#include "common/codec/fp16_delta.h"

#include <algorithm>

#include "common/codec/fp16.h"

namespace r2sp::codec {
namespace {

constexpr size_t kBlock = 2048;  // floats: 8 KiB of differences on the stack

// A binary16 value with all exponent bits set is Inf or NaN.
bool AllFinite(const uint16_t* half, size_t n) {
  uint16_t any_max_exponent = 0;
  for (size_t i = 0; i < n; ++i) {
    any_max_exponent |= static_cast<uint16_t>((half[i] & 0x7c00) == 0x7c00);
  }
  return any_max_exponent == 0;
}

}  // namespace

void AddFp16Deltas(const uint16_t* deltas, size_t n, float* copy) {
  float decoded[kBlock];
  for (size_t begin = 0; begin < n; begin += kBlock) {
    const size_t len = std::min(kBlock, n - begin);
    DecodeFp16(deltas + begin, len, decoded);
    float* c = copy + begin;
    for (size_t i = 0; i < len; ++i) c[i] += decoded[i];
  }
}

bool EncodeFp16Deltas(const float* target, size_t n, float* shadow, uint16_t* out) {
  float block[kBlock];
  for (size_t begin = 0; begin < n; begin += kBlock) {
    const size_t len = std::min(kBlock, n - begin);
    const float* t = target + begin;
    float* s = shadow + begin;
    for (size_t i = 0; i < len; ++i) block[i] = t[i] - s[i];
    EncodeFp16(block, len, out + begin);
    if (!AllFinite(out + begin, len)) return false;
    DecodeFp16(out + begin, len, block);
    for (size_t i = 0; i < len; ++i) s[i] += block[i];
  }
  return true;
}

}  // namespace r2sp::codec
