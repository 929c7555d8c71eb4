// See finite.h.
#include "common/wire/finite.h"

#include <cstdint>
#include <cstring>

#include "common/target_clones.h"

namespace r2sp::wire {
namespace {

R2SP_TARGET_CLONES
uint32_t NonFiniteCount(const float* __restrict v, size_t n) {
  // Exponent bits all ones: Inf or NaN. Branch-free, so the loop vectorises.
  uint32_t count = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &v[i], sizeof(bits));
    count += (bits & 0x7f800000u) == 0x7f800000u;
  }
  return count;
}

}  // namespace

bool AllFinite(const float* values, size_t n) { return NonFiniteCount(values, n) == 0; }

}  // namespace r2sp::wire
