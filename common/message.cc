// Wire framing for R2SP messages; see message.h.
#include "common/message.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace r2sp {
namespace {

void NoFree(void* /*data*/, void* /*hint*/) {}

}  // namespace

zmq::message_t BorrowedFrame(const void* data, size_t size) {
  // libzmq never writes through this pointer; the const_cast only satisfies its C signature.
  return zmq::message_t(const_cast<void*>(data), size, &NoFree, nullptr);
}

zmq::message_t EncodeHeader(Message& msg) {
  msg.header.clear_payload_bytes();
  for (const zmq::message_t& frame : msg.payload) {
    msg.header.add_payload_bytes(frame.size());
  }
  const size_t size = msg.header.ByteSizeLong();
  zmq::message_t frame(size);
  msg.header.SerializeWithCachedSizesToArray(static_cast<uint8_t*>(frame.data()));
  return frame;
}

absl::StatusOr<Message> DecodeFrames(std::vector<zmq::message_t>& frames,
                                     const DecodeLimits& limits) {
  if (frames.empty()) return absl::InvalidArgumentError("empty message");
  const zmq::message_t& head = frames[0];
  if (head.size() > limits.max_header_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("header frame of ", head.size(),
                                                   " bytes exceeds the limit of ",
                                                   limits.max_header_bytes));
  }
  Message msg;
  if (!msg.header.ParseFromArray(head.data(), static_cast<int>(head.size()))) {
    return absl::InvalidArgumentError("header frame is not a valid protobuf Header");
  }
  const proto::MsgType type = msg.header.type();
  if (type == proto::MSG_UNSPECIFIED || !proto::MsgType_IsValid(type)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown message type ", type));
  }
  const size_t payload_frames = frames.size() - 1;
  if (payload_frames > limits.max_payload_frames) {
    return absl::InvalidArgumentError(
        absl::StrCat("too many payload frames: ", payload_frames));
  }
  if (static_cast<size_t>(msg.header.payload_bytes_size()) != payload_frames) {
    return absl::InvalidArgumentError(absl::StrCat("header announces ",
                                                   msg.header.payload_bytes_size(),
                                                   " payload frames, message has ",
                                                   payload_frames));
  }
  msg.payload.reserve(payload_frames);
  for (size_t i = 0; i < payload_frames; ++i) {
    zmq::message_t& frame = frames[i + 1];
    if (frame.size() != msg.header.payload_bytes(static_cast<int>(i))) {
      return absl::InvalidArgumentError(
          absl::StrCat("payload frame ", i, " has ", frame.size(), " bytes, header says ",
                       msg.header.payload_bytes(static_cast<int>(i))));
    }
    msg.payload.push_back(std::move(frame));
  }
  frames.clear();
  return msg;
}

proto::ErrorCode ToErrorCode(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return proto::OK;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kNotFound:
      return proto::INVALID_ARGUMENT;
    case absl::StatusCode::kUnavailable:
      return proto::NOT_READY;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAlreadyExists:
      return proto::FAILED_PRECONDITION;
    case absl::StatusCode::kCancelled:
      return proto::SHUTTING_DOWN;
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      return proto::PERMISSION_DENIED;
    default:
      return proto::INTERNAL;
  }
}

absl::Status FromReplyHeader(const proto::Header& header) {
  const std::string& what = header.error();
  switch (header.code()) {
    case proto::OK:
      return absl::OkStatus();
    case proto::BAD_MESSAGE:
    case proto::INVALID_ARGUMENT:
      return absl::InvalidArgumentError(what);
    case proto::NOT_READY:
      return absl::UnavailableError(what);
    case proto::FAILED_PRECONDITION:
      return absl::FailedPreconditionError(what);
    case proto::SHUTTING_DOWN:
      return absl::CancelledError(what);
    case proto::PERMISSION_DENIED:
      return absl::PermissionDeniedError(what);
    default:
      return absl::InternalError(absl::StrCat("peer error ", header.code(), ": ", what));
  }
}

proto::Header ReplyHeaderFor(const proto::Header& request, const absl::Status& status) {
  proto::Header reply;
  reply.set_type(request.type());
  reply.set_is_reply(true);
  reply.set_request_id(request.request_id());
  reply.set_key(request.key());
  reply.set_code(ToErrorCode(status));
  if (!status.ok()) reply.set_error(std::string(status.message()));
  return reply;
}

size_t PayloadBytes(const Message& msg) {
  size_t total = 0;
  for (const zmq::message_t& frame : msg.payload) total += frame.size();
  return total;
}

}  // namespace r2sp
