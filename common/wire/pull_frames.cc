// See pull_frames.h.
#include "common/wire/pull_frames.h"

#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/codec/fp16.h"
#include "common/codec/fp16_delta.h"
#include "common/status_macros.h"

namespace r2sp::wire {
namespace {

absl::Status Bad(const PullAsked& asked, const std::string& why) {
  return absl::InternalError(absl::StrCat("PULL reply for key ", asked.key, ": ", why));
}

}  // namespace

Message EncodePull(const PullRequest& pull) {
  Message request;
  request.header.set_type(proto::PULL);
  request.header.set_sender_role(proto::WORKER);
  request.header.set_sender_rank(pull.rank);
  request.header.set_key(pull.key);
  proto::PullInfo* info = request.header.mutable_pull();  // present even when empty
  info->set_min_version(pull.min_version);
  if (pull.min_clock > 0) info->set_min_clock(pull.min_clock);
  if (pull.predict_updates > 0) {
    info->set_predict_fraction(pull.predict_fraction);
    info->set_predict_updates(pull.predict_updates);
  }
  if (pull.codec != proto::FP32) request.header.set_codec(pull.codec);
  if (pull.codec == proto::FP16_DELTA) info->set_delta_base(pull.delta_base);
  return request;
}

absl::StatusOr<PullRequest> DecodePull(const Message& request, bool allow_predicted) {
  const proto::Header& header = request.header;
  if (!request.payload.empty()) return absl::InvalidArgumentError("PULL carries no payload");
  const proto::PullInfo& info = header.pull();
  if (info.predict_fraction() != 0.0f || info.predict_updates() != 0) {
    if (!allow_predicted) {
      return absl::InvalidArgumentError("predicted pulls are for asynchronous modes, not bsp");
    }
    if (!(info.predict_fraction() > 0.0f && info.predict_fraction() <= 1.0f) ||
        info.predict_updates() < 1 || info.predict_updates() > kMaxPredictedUpdates) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a predicted pull needs a fraction in (0, 1] and 1 to ", kMaxPredictedUpdates,
          " updates, got ", info.predict_fraction(), " and ", info.predict_updates()));
    }
  }
  if (header.codec() != proto::FP32 && header.codec() != proto::FP16 &&
      header.codec() != proto::FP16_DELTA) {
    return absl::InvalidArgumentError(
        absl::StrCat("PULL: unknown codec ", static_cast<int>(header.codec())));
  }
  if (info.delta_base() != 0 && header.codec() != proto::FP16_DELTA) {
    return absl::InvalidArgumentError("PULL: a delta_base is for FP16_DELTA pulls only");
  }
  PullRequest pull;
  pull.key = header.key();
  pull.rank = header.sender_rank();
  pull.min_version = info.min_version();
  pull.min_clock = info.min_clock();
  pull.predict_fraction = info.predict_fraction();
  pull.predict_updates = info.predict_updates();
  pull.codec = header.codec();
  pull.delta_base = info.delta_base();
  return pull;
}

Message EncodePullReply(const PullReplyFields& fields, proto::Codec codec, zmq::message_t frame) {
  Message reply;
  reply.header.set_clock(fields.version);
  proto::Header& header = reply.header;
  if (fields.waited_seconds > 0)
    header.mutable_pull_reply()->set_waited_seconds(fields.waited_seconds);
  if (fields.steps > 0) header.mutable_pull_reply()->set_steps(fields.steps);
  if (fields.restored_steps > 0) {
    header.mutable_pull_reply()->set_restored_steps(fields.restored_steps);
  }
  if (fields.delta_seq.has_value()) header.mutable_pull_reply()->set_delta_seq(*fields.delta_seq);
  if (codec != proto::FP32) header.set_codec(codec);
  reply.payload.push_back(std::move(frame));
  return reply;
}

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

}  // namespace r2sp::wire
