// A decoded R2SP message (protobuf header + raw payload frames) and its wire framing:
// encoding for send, decoding with structural validation on receipt.
#ifndef R2SP_COMMON_MESSAGE_H_
#define R2SP_COMMON_MESSAGE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/messages.pb.h"
#include "zmq.hpp"

namespace r2sp {

// A message as handlers see it. Payload frames received from the network are the bytes
// libzmq received, not copies. Movable, not copyable.
struct Message {
  proto::Header header;
  std::vector<zmq::message_t> payload;
};

// Limits applied when decoding a received message.
struct DecodeLimits {
  // The REGISTER reply carries the address book, about 65 bytes a node in the servers' copy
  // (with the workers' routing ids): 64 KiB stopped a job at about 1,000 workers (the servers
  // dropped their reply and were declared dead); 1 MiB holds some 16,000 nodes, and a header is
  // still parsed once and far below the 256 MiB frame limit (TransportOptions).
  size_t max_header_bytes = 1024 * 1024;
  size_t max_payload_frames = 16;
};

// A payload frame over caller-owned memory, sent without a copy.
// REQUIRES: [data, data+size) stays valid and unchanged until the reply to the request that
// carries it has arrived (libzmq has then finished reading it) or the transport is destroyed.
zmq::message_t BorrowedFrame(const void* data, size_t size);

// Serialises `msg.header`, after setting header.payload_bytes from the payload frames.
zmq::message_t EncodeHeader(Message& msg);

// Builds a Message from received frames (frame 0 header, then payload), checking that the
// header parses, its type is known, and the announced payload sizes match the frames.
// Consumes `frames`. Errors are InvalidArgument with a description fit for logs and replies.
absl::StatusOr<Message> DecodeFrames(std::vector<zmq::message_t>& frames,
                                     const DecodeLimits& limits);

// Maps between absl status codes and the wire's error codes.
proto::ErrorCode ToErrorCode(const absl::Status& status);
absl::Status FromReplyHeader(const proto::Header& header);

// A reply header answering `request` with `status`.
proto::Header ReplyHeaderFor(const proto::Header& request, const absl::Status& status);

// Total payload bytes of a message.
size_t PayloadBytes(const Message& msg);

}  // namespace r2sp

#endif  // R2SP_COMMON_MESSAGE_H_
