// The worker's side of a PULL reply: checks it against what was asked (codec, size, the delta
// sequence of FP16_DELTA pulls) before it writes anything, then writes the partition's weights:
// copied (fp32), decoded (fp16 weights) or added to the copy held (fp16 deltas).
#ifndef R2SP_WORKER_PULL_DECODER_H_
#define R2SP_WORKER_PULL_DECODER_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "common/handler.h"

namespace r2sp {

struct PullAsked {
  uint64_t key = 0;
  size_t num_elements = 0;
  proto::Codec codec = proto::FP32;
  uint64_t delta_base = 0;  // FP16_DELTA: the sequence of the copy `data` holds (0: none)
};

struct PulledPartition {
  size_t bytes = 0;        // as they travelled
  double waited_seconds = 0;
  uint64_t delta_seq = 0;  // FP16_DELTA pulls: the sequence of the copy now in `data`; else 0
  double steps = 0;           // global-batch steps the partition has had (proto PullReply)
  double restored_steps = 0;  // those its checkpoint held, if the server restored one
};

// Writes the reply's weights for `asked` into `data` (num_elements floats, which for an
// FP16_DELTA pull hold the copy at asked.delta_base). An error reply, or a reply that does not
// fit the request, is an error and leaves `data` untouched.
absl::StatusOr<PulledPartition> DecodePullReply(const Message& reply, const PullAsked& asked,
                                                float* data);

}  // namespace r2sp

#endif  // R2SP_WORKER_PULL_DECODER_H_
