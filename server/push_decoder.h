// Validates and decodes a PUSH's payload for one partition, whatever its codec (proto Codec):
// fp32 (zero-copy when aligned), fp16 (decoded into scratch), top-k index/value pairs and csc
// chunks (kept sparse; fp16 values are decoded, and misaligned values or ids copied, into
// scratch). Every check runs
// before anything is applied, so a bad push leaves the server's state untouched: wrong frame
// count or size, an unknown codec or value codec, ids unsorted, duplicated or out of range, a
// chunk size of 0, values that do not match the ids, and NaN or Inf values.
#ifndef R2SP_SERVER_PUSH_DECODER_H_
#define R2SP_SERVER_PUSH_DECODER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/handler.h"
#include "server/gradient_view.h"

namespace r2sp {

// Not thread-safe (the server's I/O thread owns one).
class PushDecoder {
 public:
  // The push's gradient for a partition of `num_elements` values. The view borrows `request`'s
  // frames or this decoder's scratch: valid until the next Decode, while `request` lives.
  absl::StatusOr<GradientView> Decode(const Message& request, size_t num_elements);

 private:
  absl::StatusOr<GradientView> DecodeDense(const Message& request, size_t n);
  absl::StatusOr<GradientView> DecodeSparse(const Message& request, size_t n);
  // The frame's values as fp32 and aligned: the frame itself, or decoded or copied into
  // `scratch`.
  const float* Values(const zmq::message_t& frame, bool half, size_t count,
                      std::vector<float>* scratch);

  std::vector<float> scratch_;  // decoded or aligned values (one Decode uses it once)
  std::vector<uint32_t> id_scratch_;  // aligned copy of misaligned ids
};

}  // namespace r2sp

#endif  // R2SP_SERVER_PUSH_DECODER_H_
