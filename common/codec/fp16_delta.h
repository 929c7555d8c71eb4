// fp16 deltas for pulls (proto FP16_DELTA): weights travel as binary16 differences to a copy
// the receiver already holds. The sender keeps the same copy (its "shadow") and updates it with
// exactly the rounded deltas the receiver adds, so the two copies stay bit-identical and what
// rounding drops from one delta goes out with the next (error feedback on the pull side).
#ifndef R2SP_COMMON_CODEC_FP16_DELTA_H_
#define R2SP_COMMON_CODEC_FP16_DELTA_H_

#include <cstddef>
#include <cstdint>

namespace r2sp::codec {

// copy[i] += HalfToFloat(deltas[i]) for n values: what the receiver does with a reply.
void AddFp16Deltas(const uint16_t* deltas, size_t n, float* copy);

// Writes the binary16 rounding of target[i] - shadow[i] to out[i] and adds it to shadow[i]
// (AddFp16Deltas), for n values. Returns false if a delta is not finite in binary16 (overflow
// above 65504, or a non-finite weight): then `out` is unusable and `shadow` partly updated, and
// the caller sends the whole weights instead (and resets its shadow to them).
bool EncodeFp16Deltas(const float* target, size_t n, float* shadow, uint16_t* out);

}  // namespace r2sp::codec

#endif  // R2SP_COMMON_CODEC_FP16_DELTA_H_
