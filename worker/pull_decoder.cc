// See pull_decoder.h.
#include "worker/pull_decoder.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/codec/fp16.h"
#include "common/codec/fp16_delta.h"
#include "common/status_macros.h"

namespace r2sp {
namespace {

absl::Status Bad(const PullAsked& asked, const std::string& why) {
  return absl::InternalError(absl::StrCat("PULL reply for key ", asked.key, ": ", why));
}

}  // namespace

absl::StatusOr<PulledPartition> DecodePullReply(const Message& reply, const PullAsked& asked,
                                                float* data) {
  R2SP_RETURN_IF_ERROR(FromReplyHeader(reply.header));
  const proto::Codec codec = reply.header.codec();
  const uint64_t seq = reply.header.pull_reply().delta_seq();
  size_t value_bytes = sizeof(float);
  switch (codec) {
    case proto::FP32:
      if (asked.codec == proto::FP16_DELTA && seq == 0) {
        return Bad(asked, "whole weights for a delta pull without a delta_seq");
      }
      break;
    case proto::FP16:
    case proto::FP16_DELTA:
      if (codec != asked.codec) {
        return Bad(asked, absl::StrCat("codec ", proto::Codec_Name(codec), " for a ",
                                       proto::Codec_Name(asked.codec), " pull"));
      }
      if (codec == proto::FP16_DELTA && (asked.delta_base == 0 || seq != asked.delta_base + 1)) {
        return Bad(asked, absl::StrCat("deltas making copy ", seq, " for a pull holding copy ",
                                       asked.delta_base));
      }
      value_bytes = sizeof(uint16_t);
      break;
    default:
      return Bad(asked, absl::StrCat("unknown codec ", static_cast<int>(codec)));
  }
  const size_t bytes = asked.num_elements * value_bytes;
  if (reply.payload.size() != 1 || reply.payload[0].size() != bytes) {
    return Bad(asked, absl::StrCat("carries ", PayloadBytes(reply), " bytes in ",
                                   reply.payload.size(), " frames, expected ", bytes, " in 1"));
  }
  const void* values = reply.payload[0].data();
  if (codec == proto::FP32) {
    if (bytes > 0) std::memcpy(data, values, bytes);  // (an empty partition's `data` may be null)
  } else if (codec == proto::FP16) {
    codec::DecodeFp16(static_cast<const uint16_t*>(values), asked.num_elements, data);
  } else {
    codec::AddFp16Deltas(static_cast<const uint16_t*>(values), asked.num_elements, data);
  }
  PulledPartition pulled;
  pulled.bytes = bytes;
  pulled.waited_seconds = reply.header.pull_reply().waited_seconds();
  pulled.steps = reply.header.pull_reply().steps();
  pulled.restored_steps = reply.header.pull_reply().restored_steps();
  if (asked.codec == proto::FP16_DELTA) pulled.delta_seq = seq;
  return pulled;
}

}  // namespace r2sp
