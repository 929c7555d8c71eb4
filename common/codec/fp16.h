// IEEE 754 binary16 ("fp16") conversion for gradients and weights on the wire: fp32 -> fp16
// rounds to nearest, ties to even; overflow gives ±Inf; values below half the smallest
// subnormal give ±0; NaN stays NaN (quietened, keeping the top payload bits, as F16C does).
// fp16 -> fp32 is exact. The bulk functions pick the widest path this CPU has at run time
// (AVX-512F, F16C, or portable scalar code), all bit-identical to the scalar reference.
#ifndef R2SP_COMMON_CODEC_FP16_H_
#define R2SP_COMMON_CODEC_FP16_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace r2sp::codec {

// The scalar reference, one value at a time.
uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t half);

// Converts n values. `out` must not overlap `in`. DecodeFp16's `in` need not be aligned
// (frames received without a copy may start at any byte).
void EncodeFp16(const float* in, size_t n, uint16_t* out);
void DecodeFp16(const uint16_t* in, size_t n, float* out);

// The implementations, for tests and benchmarks to pin one.
enum class Fp16Path { kScalar, kF16c, kAvx512 };
const char* Fp16PathName(Fp16Path path);
// The paths this CPU can run, scalar first; the last one is what EncodeFp16 uses.
std::vector<Fp16Path> AvailableFp16Paths();
void EncodeFp16With(Fp16Path path, const float* in, size_t n, uint16_t* out);
void DecodeFp16With(Fp16Path path, const uint16_t* in, size_t n, float* out);

}  // namespace r2sp::codec

#endif  // R2SP_COMMON_CODEC_FP16_H_
