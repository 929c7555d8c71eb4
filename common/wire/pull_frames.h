// The PULL wire format, both sides: the worker's request (EncodePull) and the server's check of
// it (DecodePull); the server's reply (EncodePullReply) and the worker's check of it
// (DecodePullReply), which refuses a reply that does not fit what was asked (codec, size, the
// delta sequence of FP16_DELTA pulls) before it writes anything, then writes the partition's
// weights: copied (fp32), decoded (fp16 weights) or added to the copy held (fp16 deltas).
//
// Frames: a request carries none; a reply carries one, the partition's n values as fp32 or
// binary16 (weights, or FP16_DELTA differences to the worker's copy).
#ifndef R2SP_COMMON_WIRE_PULL_FRAMES_H_
#define R2SP_COMMON_WIRE_PULL_FRAMES_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "common/message.h"

namespace r2sp::wire {

// Bounds a predicted pull's update count (a worker asks for W - 1).
inline constexpr int kMaxPredictedUpdates = 1 << 16;

// A PULL request (proto PullInfo and the header fields it travels with).
struct PullRequest {
  uint64_t key = 0;
  int rank = 0;                   // the pulling worker's
  int64_t min_version = 0;        // BSP: answer once the partition has this many clocks applied
  int64_t min_clock = 0;          // SSP: once every live worker pushed it this many times
  float predict_fraction = 0.0f;  // 0: the current weights, else predicted ones
  int predict_updates = 0;
  proto::Codec codec = proto::FP32;  // of the reply: FP32, FP16 or FP16_DELTA
  uint64_t delta_base = 0;           // FP16_DELTA: the copy the worker holds (0: none)
};

Message EncodePull(const PullRequest& pull);
// The request `request` carries, checked: no payload, a prediction's fraction in (0, 1] and
// 1 to kMaxPredictedUpdates updates (refused outright unless `allow_predicted`, as in bsp), a
// reply codec of FP32, FP16 or FP16_DELTA, a delta_base only for FP16_DELTA. Errors are
// InvalidArgument.
absl::StatusOr<PullRequest> DecodePull(const Message& request, bool allow_predicted);

// What a PULL reply's header says besides its codec.
struct PullReplyFields {
  int64_t version = 0;                // the partition's (Header.clock)
  double waited_seconds = 0;          // how long the pull was parked
  double steps = 0;                   // global-batch steps the partition has had
  double restored_steps = 0;          // those its checkpoint held, if the server restored one
  std::optional<uint64_t> delta_seq;  // FP16_DELTA pulls: the copy the worker holds after
};

// The reply carrying `frame` in `codec` (FP32, FP16, or FP16_DELTA deltas).
Message EncodePullReply(const PullReplyFields& fields, proto::Codec codec, zmq::message_t frame);

// What the worker asked, to check the reply against.
struct PullAsked {
  uint64_t key = 0;
  size_t num_elements = 0;
  proto::Codec codec = proto::FP32;
  uint64_t delta_base = 0;  // FP16_DELTA: the sequence of the copy `data` holds (0: none)
};

struct PulledPartition {
  size_t bytes = 0;  // as they travelled
  double waited_seconds = 0;
  uint64_t delta_seq = 0;     // FP16_DELTA pulls: the sequence of the copy now in `data`; else 0
  double steps = 0;           // global-batch steps the partition has had (proto PullReply)
  double restored_steps = 0;  // those its checkpoint held, if the server restored one
};

// Writes the reply's weights for `asked` into `data` (num_elements floats, which for an
// FP16_DELTA pull hold the copy at asked.delta_base). An error reply is its error; a reply that
// does not fit the request is Internal. Either leaves `data` untouched.
absl::StatusOr<PulledPartition> DecodePullReply(const Message& reply, const PullAsked& asked,
                                                float* data);

}  // namespace r2sp::wire

#endif  // R2SP_COMMON_WIRE_PULL_FRAMES_H_
