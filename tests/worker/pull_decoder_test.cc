// The worker's check of PULL replies: fp32 copies, fp16 weights decoded, fp16 deltas added to
// the copy held; and every reply that does not fit its request (error replies, unknown codecs,
// a codec not asked for, a delta to another copy, wrong sizes or frame counts) is an error that
// leaves the partition's buffer untouched.
#include "worker/pull_decoder.h"

#include <vector>

#include "common/codec/fp16.h"
#include "gtest/gtest.h"

namespace r2sp {
namespace {

Message Reply(proto::Codec codec, std::vector<zmq::message_t> frames, uint64_t seq = 0) {
  Message m;
  m.header.set_type(proto::PULL);
  m.header.set_is_reply(true);
  m.header.set_codec(codec);
  if (seq != 0) m.header.mutable_pull_reply()->set_delta_seq(seq);
  m.payload = std::move(frames);
  return m;
}

std::vector<zmq::message_t> Floats(const std::vector<float>& v) {
  std::vector<zmq::message_t> frames;
  frames.push_back(zmq::message_t(v.data(), v.size() * sizeof(float)));
  return frames;
}

std::vector<zmq::message_t> Halves(const std::vector<float>& v) {
  std::vector<uint16_t> half(v.size());
  codec::EncodeFp16(v.data(), v.size(), half.data());
  std::vector<zmq::message_t> frames;
  frames.push_back(zmq::message_t(half.data(), half.size() * sizeof(uint16_t)));
  return frames;
}

PullAsked Asked(proto::Codec codec, uint64_t base = 0) {
  PullAsked a;
  a.key = 7;
  a.num_elements = 3;
  a.codec = codec;
  a.delta_base = base;
  return a;
}

TEST(PullDecoderTest, WritesEachCodecsWeights) {
  std::vector<float> data(3, 0.0f);
  absl::StatusOr<PulledPartition> p =
      DecodePullReply(Reply(proto::FP32, Floats({1, 2, 3})), Asked(proto::FP32), data.data());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(data, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(p->bytes, 12u);
  EXPECT_EQ(p->delta_seq, 0u);

  p = DecodePullReply(Reply(proto::FP16, Halves({0.5f, -1, 4})), Asked(proto::FP16), data.data());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(data, (std::vector<float>{0.5f, -1, 4}));
  EXPECT_EQ(p->bytes, 6u);

  // A delta pull's whole weights (first pull) start the copy; deltas add to it.
  p = DecodePullReply(Reply(proto::FP32, Floats({1, 2, 3}), 4), Asked(proto::FP16_DELTA),
                      data.data());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->delta_seq, 4u);
  p = DecodePullReply(Reply(proto::FP16_DELTA, Halves({0.25f, -0.5f, 0}), 5),
                      Asked(proto::FP16_DELTA, 4), data.data());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(data, (std::vector<float>{1.25f, 1.5f, 3}));
  EXPECT_EQ(p->delta_seq, 5u);
  EXPECT_EQ(p->bytes, 6u);
}

TEST(PullDecoderTest, RefusesRepliesThatDoNotFitTheRequestAndWritesNothing) {
  struct Case {
    const char* what;
    Message reply;
    PullAsked asked;
  };
  Message error = Reply(proto::FP32, {});
  error.header.set_code(proto::INVALID_ARGUMENT);
  error.header.set_error("key 7 is not held by server 0");
  std::vector<zmq::message_t> two = Floats({1, 2, 3});
  two.push_back(zmq::message_t("x", 1));
  std::vector<Case> cases;
  cases.push_back({"error reply", std::move(error), Asked(proto::FP32)});
  cases.push_back({"unknown codec", Reply(static_cast<proto::Codec>(9), Floats({1, 2, 3})),
                   Asked(proto::FP32)});
  cases.push_back({"sparse codec", Reply(proto::TOPK, Floats({1, 2, 3})), Asked(proto::FP32)});
  cases.push_back({"fp16 not asked", Reply(proto::FP16, Halves({1, 2, 3})), Asked(proto::FP32)});
  cases.push_back({"deltas not asked", Reply(proto::FP16_DELTA, Halves({1, 2, 3}), 2),
                   Asked(proto::FP16, 0)});
  cases.push_back({"deltas to another copy", Reply(proto::FP16_DELTA, Halves({1, 2, 3}), 9),
                   Asked(proto::FP16_DELTA, 4)});
  cases.push_back({"deltas without a copy", Reply(proto::FP16_DELTA, Halves({1, 2, 3}), 1),
                   Asked(proto::FP16_DELTA, 0)});
  cases.push_back({"whole weights without a sequence", Reply(proto::FP32, Floats({1, 2, 3})),
                   Asked(proto::FP16_DELTA, 4)});
  cases.push_back({"short fp32", Reply(proto::FP32, Floats({1, 2})), Asked(proto::FP32)});
  cases.push_back({"fp32 size for fp16", Reply(proto::FP16, Floats({1, 2, 3})),
                   Asked(proto::FP16)});
  cases.push_back({"long deltas", Reply(proto::FP16_DELTA, Halves({1, 2, 3, 4}), 5),
                   Asked(proto::FP16_DELTA, 4)});
  cases.push_back({"two frames", Reply(proto::FP32, std::move(two)), Asked(proto::FP32)});
  cases.push_back({"no frame", Reply(proto::FP32, {}), Asked(proto::FP32)});
  for (Case& c : cases) {
    std::vector<float> data = {-1, -1, -1};
    absl::StatusOr<PulledPartition> p = DecodePullReply(c.reply, c.asked, data.data());
    EXPECT_FALSE(p.ok()) << c.what;
    EXPECT_EQ(data, (std::vector<float>{-1, -1, -1})) << c.what;
  }
}

}  // namespace
}  // namespace r2sp
