// Fuzz target: DecodeFrames (common/message.h), the validation every received message passes
// before any handler sees it. The input is a sequence of messages (fuzz_input.h TakeFrames);
// each one accepted must re-encode to a header that decodes again to the same header.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/message.h"
#include "glog/logging.h"
#include "tests/fuzz/fuzz_input.h"

namespace r2sp::fuzz {
namespace {

void CheckAccepted(Message& msg) {
  CHECK_EQ(static_cast<size_t>(msg.header.payload_bytes_size()), msg.payload.size());
  for (size_t i = 0; i < msg.payload.size(); ++i) {
    CHECK_EQ(msg.header.payload_bytes(static_cast<int>(i)), msg.payload[i].size());
  }
  // What a node does with a request: answer it, and read a reply's status.
  const proto::Header reply = ReplyHeaderFor(msg.header, FromReplyHeader(msg.header));
  CHECK(reply.is_reply());
  const std::string before = msg.header.SerializeAsString();
  std::vector<zmq::message_t> again;
  again.push_back(EncodeHeader(msg));
  for (zmq::message_t& frame : msg.payload) again.push_back(std::move(frame));
  DecodeLimits unlimited;  // re-encoding may lengthen what the limit let in (varints)
  unlimited.max_header_bytes = SIZE_MAX;
  absl::StatusOr<Message> decoded = DecodeFrames(again, unlimited);
  CHECK(decoded.ok()) << decoded.status();
  CHECK_EQ(decoded->header.SerializeAsString(), before);
}

}  // namespace
}  // namespace r2sp::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace r2sp;
  fuzz::FuzzInput in(data, size);
  while (!in.empty()) {
    std::vector<zmq::message_t> frames = fuzz::TakeFrames(in);
    absl::StatusOr<Message> msg = DecodeFrames(frames, DecodeLimits());
    if (msg.ok()) fuzz::CheckAccepted(*msg);
  }
  return 0;
}
