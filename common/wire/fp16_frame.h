// The one place a binary16 frame is built from fp32 values: a worker's fp16 push of a host
// gradient, and a server's fp16 reply with predicted weights (current weights go in the frame
// PartitionState caches per version).
#ifndef R2SP_COMMON_WIRE_FP16_FRAME_H_
#define R2SP_COMMON_WIRE_FP16_FRAME_H_

#include <cstddef>

#include "zmq.hpp"

namespace r2sp::wire {

// `values` (n floats) rounded to binary16 (common/codec/fp16.h), in a frame of its own.
zmq::message_t Fp16Frame(const float* values, size_t n);

}  // namespace r2sp::wire

#endif  // R2SP_COMMON_WIRE_FP16_FRAME_H_
