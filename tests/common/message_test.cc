// Framing and validation of received messages.
#include "common/message.h"

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace r2sp {
namespace {

std::vector<zmq::message_t> Frames(Message& msg) {
  std::vector<zmq::message_t> frames;
  frames.push_back(EncodeHeader(msg));
  for (zmq::message_t& p : msg.payload) frames.push_back(std::move(p));
  return frames;
}

Message PushOf(const std::vector<float>& values) {
  Message msg;
  msg.header.set_type(proto::PUSH);
  msg.header.set_key(7);
  msg.payload.push_back(zmq::message_t(values.data(), values.size() * sizeof(float)));
  return msg;
}

TEST(MessageTest, RoundTripKeepsHeaderAndPayload) {
  const std::vector<float> values = {1.5f, -2.0f, 3.25f};
  Message msg = PushOf(values);
  std::vector<zmq::message_t> frames = Frames(msg);
  absl::StatusOr<Message> decoded = DecodeFrames(frames, DecodeLimits());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->header.type(), proto::PUSH);
  EXPECT_EQ(decoded->header.key(), 7u);
  ASSERT_EQ(decoded->payload.size(), 1u);
  ASSERT_EQ(decoded->payload[0].size(), sizeof(float) * 3);
  EXPECT_EQ(std::memcmp(decoded->payload[0].data(), values.data(), sizeof(float) * 3), 0);
}

TEST(MessageTest, BorrowedFrameDoesNotCopy) {
  std::vector<float> values(1000, 1.0f);
  zmq::message_t frame = BorrowedFrame(values.data(), values.size() * sizeof(float));
  EXPECT_EQ(frame.data(), static_cast<void*>(values.data()));
}

TEST(MessageTest, RejectsTruncatedPayload) {
  Message msg = PushOf({1, 2, 3, 4});
  std::vector<zmq::message_t> frames = Frames(msg);
  frames[1] = zmq::message_t(frames[1].data(), 10);  // cut short
  absl::StatusOr<Message> decoded = DecodeFrames(frames, DecodeLimits());
  EXPECT_TRUE(absl::IsInvalidArgument(decoded.status()));
  EXPECT_NE(decoded.status().message().find("header says 16"), std::string::npos);
}

TEST(MessageTest, RejectsMissingAndExtraFrames) {
  Message msg = PushOf({1, 2});
  std::vector<zmq::message_t> frames = Frames(msg);
  frames.pop_back();
  EXPECT_FALSE(DecodeFrames(frames, DecodeLimits()).ok());

  Message msg2 = PushOf({1, 2});
  std::vector<zmq::message_t> frames2 = Frames(msg2);
  frames2.emplace_back(8);
  EXPECT_FALSE(DecodeFrames(frames2, DecodeLimits()).ok());
}

TEST(MessageTest, RejectsGarbageAndUnknownTypes) {
  std::vector<zmq::message_t> garbage;
  const std::string junk = "\xff\xff\xff\xff\xff garbage";
  garbage.emplace_back(junk.data(), junk.size());
  EXPECT_FALSE(DecodeFrames(garbage, DecodeLimits()).ok());

  Message unknown;
  unknown.header.set_type(static_cast<proto::MsgType>(99));
  std::vector<zmq::message_t> frames = Frames(unknown);
  absl::StatusOr<Message> decoded = DecodeFrames(frames, DecodeLimits());
  EXPECT_TRUE(absl::IsInvalidArgument(decoded.status()));

  std::vector<zmq::message_t> none;
  EXPECT_FALSE(DecodeFrames(none, DecodeLimits()).ok());
}

TEST(MessageTest, RejectsOversizedHeaderAndTooManyFrames) {
  Message msg;
  msg.header.set_type(proto::PULL);
  msg.header.set_error(std::string(100, 'x'));
  std::vector<zmq::message_t> frames = Frames(msg);
  DecodeLimits small;
  small.max_header_bytes = 50;
  EXPECT_FALSE(DecodeFrames(frames, small).ok());

  Message many;
  many.header.set_type(proto::PUSH);
  for (int i = 0; i < 20; ++i) many.payload.emplace_back(4);
  std::vector<zmq::message_t> frames2 = Frames(many);
  EXPECT_FALSE(DecodeFrames(frames2, DecodeLimits()).ok());
}

TEST(MessageTest, ErrorCodesRoundTrip) {
  for (const absl::Status& s :
       {absl::InvalidArgumentError("a"), absl::UnavailableError("b"),
        absl::FailedPreconditionError("c"), absl::CancelledError("d")}) {
    proto::Header request;
    request.set_type(proto::PULL);
    request.set_request_id(5);
    proto::Header reply = ReplyHeaderFor(request, s);
    EXPECT_TRUE(reply.is_reply());
    EXPECT_EQ(reply.request_id(), 5u);
    EXPECT_EQ(FromReplyHeader(reply).code(), s.code());
    EXPECT_EQ(FromReplyHeader(reply).message(), s.message());
  }
}

}  // namespace
}  // namespace r2sp
