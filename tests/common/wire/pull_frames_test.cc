// The PULL wire format (common/wire/pull_frames.h): requests round-trip and malformed ones are
// refused; replies round-trip for each codec (fp32 copies, fp16 weights decoded, fp16 deltas
// added to the copy held); small requests and replies have pinned bytes; and every reply that
// does not fit its request (error replies, unknown codecs, a codec not asked for, a delta to
// another copy, wrong sizes or frame counts) is an error that leaves the partition's buffer
// untouched.
#include "common/wire/pull_frames.h"

#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "common/codec/fp16.h"
#include "gtest/gtest.h"

namespace r2sp::wire {
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
  cases.push_back(
      {"deltas not asked", Reply(proto::FP16_DELTA, Halves({1, 2, 3}), 2), Asked(proto::FP16, 0)});
  cases.push_back({"deltas to another copy", Reply(proto::FP16_DELTA, Halves({1, 2, 3}), 9),
                   Asked(proto::FP16_DELTA, 4)});
  cases.push_back({"deltas without a copy", Reply(proto::FP16_DELTA, Halves({1, 2, 3}), 1),
                   Asked(proto::FP16_DELTA, 0)});
  cases.push_back({"whole weights without a sequence", Reply(proto::FP32, Floats({1, 2, 3})),
                   Asked(proto::FP16_DELTA, 4)});
  cases.push_back({"short fp32", Reply(proto::FP32, Floats({1, 2})), Asked(proto::FP32)});
  cases.push_back(
      {"fp32 size for fp16", Reply(proto::FP16, Floats({1, 2, 3})), Asked(proto::FP16)});
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

std::string WireHex(Message& m) {
  zmq::message_t header = EncodeHeader(m);
  std::string hex = absl::BytesToHexString(
      absl::string_view(static_cast<const char*>(header.data()), header.size()));
  for (const zmq::message_t& frame : m.payload) {
    hex += " " + absl::BytesToHexString(
                     absl::string_view(static_cast<const char*>(frame.data()), frame.size()));
  }
  return hex;
}

// Expects DecodePull to refuse `m` with InvalidArgument whose message contains `what`.
void ExpectRefused(const Message& m, bool allow_predicted, const std::string& what) {
  absl::StatusOr<PullRequest> p = DecodePull(m, allow_predicted);
  ASSERT_FALSE(p.ok()) << what;
  EXPECT_TRUE(absl::IsInvalidArgument(p.status())) << p.status();
  EXPECT_NE(std::string(p.status().message()).find(what), std::string::npos) << p.status();
}

TEST(PullFramesTest, RequestsRoundTrip) {
  PullRequest want;
  want.key = 5;
  want.rank = 2;
  want.min_version = 3;
  want.min_clock = 4;
  want.predict_fraction = 0.25f;
  want.predict_updates = 3;
  want.codec = proto::FP16;
  Message m = EncodePull(want);
  EXPECT_EQ(m.header.type(), proto::PULL);
  EXPECT_EQ(m.header.sender_role(), proto::WORKER);
  EXPECT_TRUE(m.payload.empty());
  absl::StatusOr<PullRequest> got = DecodePull(m, true);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->key, 5u);
  EXPECT_EQ(got->rank, 2);
  EXPECT_EQ(got->min_version, 3);
  EXPECT_EQ(got->min_clock, 4);
  EXPECT_EQ(got->predict_fraction, 0.25f);
  EXPECT_EQ(got->predict_updates, 3);
  EXPECT_EQ(got->codec, proto::FP16);
  EXPECT_EQ(got->delta_base, 0u);

  PullRequest delta;
  delta.codec = proto::FP16_DELTA;
  delta.delta_base = 8;
  got = DecodePull(EncodePull(delta), false);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->codec, proto::FP16_DELTA);
  EXPECT_EQ(got->delta_base, 8u);
  EXPECT_EQ(got->predict_updates, 0);
}

TEST(PullFramesTest, RefusesMalformedRequests) {
  Message payload = EncodePull(PullRequest{});
  payload.payload.push_back(zmq::message_t("x", 1));
  ExpectRefused(payload, true, "PULL carries no payload");
  PullRequest predicted;
  predicted.predict_fraction = 0.5f;
  predicted.predict_updates = 2;
  ExpectRefused(EncodePull(predicted), false, "predicted pulls are for asynchronous modes");
  predicted.predict_fraction = 1.5f;
  ExpectRefused(EncodePull(predicted), true,
                "a predicted pull needs a fraction in (0, 1] and 1 to 65536 updates, got 1.5 "
                "and 2");
  predicted.predict_fraction = 0.5f;
  predicted.predict_updates = kMaxPredictedUpdates + 1;
  ExpectRefused(EncodePull(predicted), true, "got 0.5 and 65537");
  Message fraction_only = EncodePull(PullRequest{});
  fraction_only.header.mutable_pull()->set_predict_fraction(0.5f);  // no updates
  ExpectRefused(fraction_only, true, "got 0.5 and 0");
  Message topk = EncodePull(PullRequest{});
  topk.header.set_codec(proto::TOPK);
  ExpectRefused(topk, true, "PULL: unknown codec 2");
  Message base = EncodePull(PullRequest{});
  base.header.mutable_pull()->set_delta_base(4);
  ExpectRefused(base, true, "a delta_base is for FP16_DELTA pulls only");
}

TEST(PullFramesTest, RepliesRoundTripForEachCodec) {
  PullReplyFields fields;
  fields.version = 12;
  fields.waited_seconds = 0.5;
  fields.steps = 3.5;
  fields.restored_steps = 2;
  const std::vector<float> v = {1, -2, 0.25f};
  Message fp32 = EncodePullReply(fields, proto::FP32, zmq::message_t(v.data(), 12));
  EXPECT_EQ(fp32.header.clock(), 12);
  fp32.header.set_is_reply(true);
  std::vector<float> data(3, 0.0f);
  absl::StatusOr<PulledPartition> p = DecodePullReply(fp32, Asked(proto::FP32), data.data());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(data, v);
  EXPECT_EQ(p->bytes, 12u);
  EXPECT_EQ(p->waited_seconds, 0.5);
  EXPECT_EQ(p->steps, 3.5);
  EXPECT_EQ(p->restored_steps, 2);

  std::vector<zmq::message_t> half = Halves(v);
  Message fp16 = EncodePullReply(PullReplyFields{}, proto::FP16, std::move(half[0]));
  p = DecodePullReply(fp16, Asked(proto::FP16), data.data());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(data, v);
  EXPECT_EQ(p->bytes, 6u);
  EXPECT_EQ(p->waited_seconds, 0.0);

  PullReplyFields whole;  // a delta pull's first reply: the whole weights, starting copy 1
  whole.delta_seq = 1;
  p = DecodePullReply(EncodePullReply(whole, proto::FP32, zmq::message_t(v.data(), 12)),
                      Asked(proto::FP16_DELTA), data.data());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->delta_seq, 1u);
  PullReplyFields next;
  next.delta_seq = 2;
  std::vector<zmq::message_t> deltas = Halves({1, 1, -0.25f});
  p = DecodePullReply(EncodePullReply(next, proto::FP16_DELTA, std::move(deltas[0])),
                      Asked(proto::FP16_DELTA, 1), data.data());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->delta_seq, 2u);
  EXPECT_EQ(data, (std::vector<float>{2, -1, 0}));
}

// The bytes of small requests and replies, pinned: a change here changes the wire format.
// Requests: 08 07 type PULL, 20 03 sender_role WORKER, 28 rank, 30 key, 58 codec, d201 pull
// {08 min_version, 10 min_clock, 1d predict_fraction, 20 predict_updates, 28 delta_base}
// (present even when empty). Replies: 38 clock (the version), 42 payload_bytes, 58 codec, da01
// pull_reply {09 waited_seconds, 10 delta_seq, 19 steps, 21 restored_steps}.
TEST(PullFramesTest, BytesOnTheWireArePinned) {
  PullRequest plain;
  plain.key = 3;
  plain.rank = 1;
  Message request = EncodePull(plain);
  EXPECT_EQ(WireHex(request), "0807200328013003d20100");
  PullRequest full;
  full.key = 3;
  full.rank = 1;
  full.min_version = 2;
  full.min_clock = 5;
  full.predict_fraction = 0.5f;
  full.predict_updates = 3;
  full.codec = proto::FP16_DELTA;
  full.delta_base = 4;
  Message full_request = EncodePull(full);
  EXPECT_EQ(WireHex(full_request), "08072003280130035804d2010d080210051d0000003f20032804");
  const std::vector<float> v = {1, -2};
  PullReplyFields fields;
  fields.version = 9;
  fields.steps = 1.5;
  Message reply = EncodePullReply(fields, proto::FP32, zmq::message_t(v.data(), 8));
  EXPECT_EQ(WireHex(reply), "3809420108da010919000000000000f83f 0000803f000000c0");
  PullReplyFields delta;
  delta.version = 9;
  delta.waited_seconds = 0.25;
  delta.restored_steps = 1;
  delta.delta_seq = 5;
  std::vector<zmq::message_t> half = Halves(v);
  Message delta_reply = EncodePullReply(delta, proto::FP16_DELTA, std::move(half[0]));
  EXPECT_EQ(WireHex(delta_reply),
            "38094201045804da011409000000000000d03f100521000000000000f03f 003c00c0");
}

}  // namespace
}  // namespace r2sp::wire
