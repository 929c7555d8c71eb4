// See fp16_frame.h.
#include "common/wire/fp16_frame.h"

#include <cstdint>

#include "common/codec/fp16.h"

namespace r2sp::wire {

zmq::message_t Fp16Frame(const float* values, size_t n) {
  zmq::message_t half(n * sizeof(uint16_t));
  codec::EncodeFp16(values, n, static_cast<uint16_t*>(half.data()));
  return half;
}

}  // namespace r2sp::wire
