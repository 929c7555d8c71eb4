// The PUSH wire format, both sides: a worker's encoders (fp32 borrowed, fp16, sparse top-k and
// csc index/value frames) and the server's decoder, which validates a push's payload for one
// partition whatever its codec (proto Codec) and hands it on as a GradientView: fp32 (zero-copy
// when aligned), fp16 (decoded into scratch), top-k pairs and csc chunks (kept sparse; fp16
// values are decoded, and misaligned values or ids copied, into scratch). Every check runs
// before anything is applied, so a bad push leaves the server's state untouched: wrong frame
// count or size, an unknown codec or value codec, ids unsorted, duplicated or out of range, a
// chunk size of 0, values that do not match the ids, and NaN or Inf values.
//
// Frames: dense pushes carry one frame of n values (fp32 or binary16); sparse pushes carry two,
// the u32 ids (element indices for top-k, chunk ids for csc) then their values.
#ifndef R2SP_COMMON_WIRE_PUSH_FRAMES_H_
#define R2SP_COMMON_WIRE_PUSH_FRAMES_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/codec/codec_spec.h"
#include "common/codec/sparse_encoder.h"
#include "common/message.h"
#include "common/wire/gradient_view.h"

namespace r2sp::wire {

// What every PUSH header says besides its codec.
struct PushFields {
  uint64_t key = 0;  // the partition's
  int rank = 0;      // the sending worker's
  int64_t clock = 0;
  bool init = false;   // initial values (sent as fp32) instead of a gradient
  float scale = 0.0f;  // > 0: the push weighs b_i / B of a global batch (PushInfo.scale)
};

// An fp32 push whose frame borrows `values` (n floats). REQUIRES: `values` stays valid and
// unchanged until the message has been sent.
Message EncodeFp32Push(const PushFields& fields, const float* values, size_t n);
// An fp16 push of fp32 values, rounded into a frame of the message's own.
Message EncodeFp16Push(const PushFields& fields, const float* values, size_t n);
// An fp16 push of values encoded already (on a device); the frame borrows `half` (n values),
// as EncodeFp32Push borrows its values.
Message EncodeEncodedFp16Push(const PushFields& fields, const uint16_t* half, size_t n);
// A push that skips its clock (PushInfo.skip): no frames.
Message EncodeSkipPush(const PushFields& fields);
// A sparse push (spec.codec TOPK or CSC) of `encoded`, whose ids and values the frames copy
// (the encoder reuses its buffers for the next push).
Message EncodeSparsePush(const PushFields& fields, const codec::CodecSpec& spec,
                         const codec::SparseGradient& encoded);
// A lossless csc push of the chunks `ids` (increasing) of `values` (n floats in chunks of
// `chunk`), their values copied whole into the frame, in fp32 or rounded to fp16.
Message EncodeChunksPush(const PushFields& fields, const float* values, size_t n, uint32_t chunk,
                         const std::vector<uint32_t>& ids, bool fp16);

// Decodes pushes. Not thread-safe (the server's I/O thread owns one).
class PushDecoder {
 public:
  // The push's gradient for a partition of `num_elements` values. The view borrows `request`'s
  // frames or this decoder's scratch: valid until the next Decode, while `request` lives.
  // Errors are InvalidArgument, naming the key, the codec and what is wrong.
  absl::StatusOr<GradientView> Decode(const Message& request, size_t num_elements);

 private:
  absl::StatusOr<GradientView> DecodeDense(const Message& request, size_t n);
  absl::StatusOr<GradientView> DecodeSparse(const Message& request, size_t n);
  // The frame's values as fp32 and aligned: the frame itself, or decoded or copied into
  // `scratch`.
  const float* Values(const zmq::message_t& frame, bool half, size_t count,
                      std::vector<float>* scratch);

  std::vector<float> scratch_;        // decoded or aligned values (one Decode uses it once)
  std::vector<uint32_t> id_scratch_;  // aligned copy of misaligned ids
};

}  // namespace r2sp::wire

#endif  // R2SP_COMMON_WIRE_PUSH_FRAMES_H_
