// The server's side of the wire codecs: fp16 pushes are decoded before they are applied (in
// asynchronous modes and in BSP's per-clock sums), fp16 pulls answer with the weights rounded to
// binary16 (or, for FP16_DELTA pulls, the differences to each worker's copy), and malformed
// encoded pushes (wrong size, unknown codec) are refused and counted
// with the weights left bit-identical; so are NaN and Inf values, whatever the codec.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/codec/fp16.h"
#include "gtest/gtest.h"
#include "server/server_handler.h"
#include "tests/testing/fakes.h"

namespace r2sp {
namespace {

using testing::RecordingSink;
using testing::WorkerRequest;

class ServerHandlerCodecTest : public ::testing::Test {
 protected:
  void SetUpHandler(proto::SyncMode sync, int num_workers) {
    proto::TensorSpec t;
    t.set_name("w");
    t.set_num_elements(4);
    layout_ = std::make_unique<ModelLayout>(*ModelLayout::Create({t}, 16, 1));  // one partition
    ServerOptions options;
    options.sgd = {0.5f, 0.0f, 0.0f};
    options.sync = sync;
    handler_ = std::make_unique<ServerHandler>(options);
    handler_->Configure(0, ServerPeers{"scheduler", std::vector<std::string>(num_workers, "w")},
                        *layout_);
  }

  absl::Status Send(Message m) {
    Responder r(&sink_, "w", m.header);
    handler_->HandleRequest(std::move(m), std::move(r));
    std::vector<std::pair<std::string, Message>> replies = sink_.Take();
    if (replies.empty()) return absl::OkStatus();  // parked
    last_reply_ = std::move(replies.back().second);
    return FromReplyHeader(last_reply_.header);
  }

  absl::Status PushFp32(int rank, std::vector<float> values, bool init = false, int64_t clock = 0) {
    Message m = WorkerRequest(proto::PUSH, rank, 0);
    m.header.set_clock(clock);
    if (init) m.header.mutable_push()->set_init(true);
    m.payload.push_back(zmq::message_t(values.data(), values.size() * sizeof(float)));
    return Send(std::move(m));
  }

  absl::Status PushFp16(int rank, const std::vector<float>& values, int64_t clock = 0,
                        int codec = proto::FP16) {
    std::vector<uint16_t> half(values.size());
    codec::EncodeFp16(values.data(), values.size(), half.data());
    Message m = WorkerRequest(proto::PUSH, rank, 0);
    m.header.set_clock(clock);
    m.header.set_codec(static_cast<proto::Codec>(codec));
    m.payload.push_back(zmq::message_t(half.data(), half.size() * sizeof(uint16_t)));
    return Send(std::move(m));
  }

  std::vector<float> Weights() { return *handler_->Weights(0); }

  RecordingSink sink_;
  Message last_reply_;
  std::unique_ptr<ModelLayout> layout_;
  std::unique_ptr<ServerHandler> handler_;
};

TEST_F(ServerHandlerCodecTest, AsyncFp16PushIsDecodedAndApplied) {
  SetUpHandler(proto::ASP, 1);
  ASSERT_TRUE(PushFp32(0, {1, 2, 3, 4}, /*init=*/true).ok());
  ASSERT_TRUE(PushFp16(0, {2, -2, 0.5f, 1e-3f}).ok());  // a whole step at lr 0.5
  const std::vector<float> w = Weights();
  EXPECT_EQ(w[0], 0.0f);
  EXPECT_EQ(w[1], 3.0f);
  EXPECT_EQ(w[2], 2.75f);
  EXPECT_EQ(w[3], 4.0f - 0.5f * codec::HalfToFloat(codec::FloatToHalf(1e-3f)));
  EXPECT_EQ(handler_->counters().bytes_pushed(), 4 * 4 + 4 * 2);  // as they travelled
}

TEST_F(ServerHandlerCodecTest, BspSumsMixedCodecsPerClock) {
  SetUpHandler(proto::BSP, 2);
  ASSERT_TRUE(PushFp32(0, {0, 0, 0, 0}, /*init=*/true).ok());
  ASSERT_TRUE(PushFp16(0, {1, 1, 1, 1}).ok());
  ASSERT_TRUE(PushFp32(1, {3, 3, 3, 3}).ok());  // workers may use different codecs
  for (float v : Weights()) EXPECT_EQ(v, -0.5f * 2.0f);  // the average, 2, at lr 0.5
}

TEST_F(ServerHandlerCodecTest, Fp16PullCarriesTheRoundedWeights) {
  SetUpHandler(proto::ASP, 1);
  ASSERT_TRUE(PushFp32(0, {1.0f, 1.0f / 3, -65504.0f, 1e6f}, /*init=*/true).ok());
  Message pull = WorkerRequest(proto::PULL, 0, 0);
  pull.header.set_codec(proto::FP16);
  ASSERT_TRUE(Send(std::move(pull)).ok());
  EXPECT_EQ(last_reply_.header.codec(), proto::FP16);
  ASSERT_EQ(last_reply_.payload.size(), 1u);
  ASSERT_EQ(last_reply_.payload[0].size(), 4 * sizeof(uint16_t));
  uint16_t half[4];
  std::memcpy(half, last_reply_.payload[0].data(), sizeof(half));
  EXPECT_EQ(half[0], 0x3c00);
  EXPECT_EQ(half[1], codec::FloatToHalf(1.0f / 3));
  EXPECT_EQ(half[2], 0xfbff);
  EXPECT_EQ(half[3], 0x7c00);  // beyond fp16's range: Inf, as the format defines
  EXPECT_EQ(handler_->counters().bytes_pulled(), 4 * sizeof(uint16_t));
}

// fp16 pulls of one version share one encoding; a frame still held keeps its values when an
// update makes a new version, and the next pull sends the new weights.
TEST_F(ServerHandlerCodecTest, Fp16PullsOfAVersionShareOneEncodingThatUpdatesDoNotTear) {
  SetUpHandler(proto::ASP, 2);
  ASSERT_TRUE(PushFp32(0, {1, 2, 3, 4}, /*init=*/true).ok());
  auto pull = [this](int rank) {
    Message m = WorkerRequest(proto::PULL, rank, 0);
    m.header.set_codec(proto::FP16);
    EXPECT_TRUE(Send(std::move(m)).ok());
    EXPECT_EQ(last_reply_.header.codec(), proto::FP16);
    return std::move(last_reply_.payload.at(0));
  };
  auto floats = [](const zmq::message_t& frame) {
    std::vector<float> v(frame.size() / sizeof(uint16_t));
    codec::DecodeFp16(static_cast<const uint16_t*>(frame.data()), v.size(), v.data());
    return v;
  };
  zmq::message_t first = pull(0);
  zmq::message_t second = pull(1);
  EXPECT_EQ(first.data(), second.data());  // one encoding for the version
  ASSERT_TRUE(PushFp32(0, {2, 2, 2, 2}).ok());  // lr 0.5: {0, 1, 2, 3}
  zmq::message_t third = pull(0);
  EXPECT_NE(third.data(), first.data());
  EXPECT_EQ(floats(first), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(floats(third), (std::vector<float>{0, 1, 2, 3}));
  first = zmq::message_t();
  second = zmq::message_t();
  ASSERT_TRUE(PushFp32(0, {2, 2, 2, 2}).ok());  // {-1, 0, 1, 2}
  EXPECT_EQ(floats(pull(1)), (std::vector<float>{-1, 0, 1, 2}));
  EXPECT_EQ(floats(third), (std::vector<float>{0, 1, 2, 3}));  // still held: untouched
  EXPECT_EQ(handler_->counters().bytes_pulled(), 4 * 4 * sizeof(uint16_t));
}

TEST_F(ServerHandlerCodecTest, Fp16DeltaPullsAnswerWholeWeightsThenDeltasPerWorker) {
  SetUpHandler(proto::ASP, 2);
  ASSERT_TRUE(PushFp32(0, {1, 2, 3, 4}, /*init=*/true).ok());
  auto pull = [this](int rank, uint64_t base) {
    Message m = WorkerRequest(proto::PULL, rank, 0);
    m.header.set_codec(proto::FP16_DELTA);
    m.header.mutable_pull()->set_delta_base(base);
    return Send(std::move(m));
  };
  ASSERT_TRUE(pull(0, 0).ok());
  EXPECT_EQ(last_reply_.header.codec(), proto::FP32);
  EXPECT_EQ(last_reply_.header.pull_reply().delta_seq(), 1u);
  ASSERT_EQ(last_reply_.payload[0].size(), 4 * sizeof(float));
  ASSERT_TRUE(PushFp32(0, {0.5f, 0, 0, -1}).ok());  // lr 0.5: {0.75, 2, 3, 4.5}
  ASSERT_TRUE(pull(0, 1).ok());
  EXPECT_EQ(last_reply_.header.codec(), proto::FP16_DELTA);
  EXPECT_EQ(last_reply_.header.pull_reply().delta_seq(), 2u);
  ASSERT_EQ(last_reply_.payload[0].size(), 4 * sizeof(uint16_t));
  uint16_t half[4];
  std::memcpy(half, last_reply_.payload[0].data(), sizeof(half));
  EXPECT_EQ(codec::HalfToFloat(half[0]), -0.25f);
  EXPECT_EQ(codec::HalfToFloat(half[1]), 0.0f);
  EXPECT_EQ(codec::HalfToFloat(half[3]), 0.5f);
  ASSERT_TRUE(pull(1, 1).ok());  // worker 1 has no copy: whole weights
  EXPECT_EQ(last_reply_.header.codec(), proto::FP32);
  EXPECT_EQ(handler_->counters().bytes_pulled(), 2 * 4 * sizeof(float) + 4 * sizeof(uint16_t));
  // A delta base on a pull of another codec is refused.
  Message wrong = WorkerRequest(proto::PULL, 0, 0);
  wrong.header.mutable_pull()->set_delta_base(2);
  EXPECT_TRUE(absl::IsInvalidArgument(Send(std::move(wrong))));
}

TEST_F(ServerHandlerCodecTest, MalformedEncodedPushesAreRefusedAndChangeNothing) {
  SetUpHandler(proto::ASP, 1);
  ASSERT_TRUE(PushFp32(0, {1, 2, 3, 4}, /*init=*/true).ok());
  const std::vector<float> before = Weights();
  // An fp16 push whose frame has fp32's size, and one cut short.
  Message wrong_size = WorkerRequest(proto::PUSH, 0, 0);
  wrong_size.header.set_codec(proto::FP16);
  const std::vector<float> four(4, 1.0f);
  wrong_size.payload.push_back(zmq::message_t(four.data(), 16));
  EXPECT_TRUE(absl::IsInvalidArgument(Send(std::move(wrong_size))));
  Message truncated = WorkerRequest(proto::PUSH, 0, 0);
  truncated.header.set_codec(proto::FP16);
  truncated.payload.push_back(zmq::message_t(four.data(), 7));
  EXPECT_TRUE(absl::IsInvalidArgument(Send(std::move(truncated))));
  // A codec this server does not know, for a push and for a pull, and a pull-only codec pushed.
  EXPECT_TRUE(absl::IsInvalidArgument(PushFp16(0, {1, 1, 1, 1}, 0, /*codec=*/7)));
  EXPECT_TRUE(absl::IsInvalidArgument(PushFp16(0, {1, 1, 1, 1}, 0, proto::FP16_DELTA)));
  Message pull = WorkerRequest(proto::PULL, 0, 0);
  pull.header.set_codec(static_cast<proto::Codec>(9));
  EXPECT_TRUE(absl::IsInvalidArgument(Send(std::move(pull))));
  const std::vector<float> after = Weights();
  EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size() * sizeof(float)), 0);
  EXPECT_EQ(handler_->counters().dropped_messages(), 5u);
}

TEST_F(ServerHandlerCodecTest, NonFiniteValuesAreRefusedInEveryCodec) {
  SetUpHandler(proto::BSP, 1);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(absl::IsInvalidArgument(PushFp32(0, {1, inf, 3, 4}, /*init=*/true)));
  ASSERT_TRUE(PushFp32(0, {1, 2, 3, 4}, /*init=*/true).ok());
  const std::vector<float> before = Weights();
  EXPECT_TRUE(absl::IsInvalidArgument(PushFp32(0, {0, std::nanf(""), 0, 0})));
  EXPECT_TRUE(absl::IsInvalidArgument(PushFp16(0, {0, 0, 1e6f, 0})));  // Inf once in fp16
  EXPECT_TRUE(absl::IsInvalidArgument(PushFp16(0, {-inf, 0, 0, 0})));
  ASSERT_TRUE(PushFp16(0, {0, 0, 0, 65504.0f}).ok());  // the largest finite half is fine
  const std::vector<float> after = Weights();
  EXPECT_EQ(std::memcmp(before.data(), after.data(), 3 * sizeof(float)), 0);
  EXPECT_EQ(after[3], 4.0f - 0.5f * 65504.0f);  // the clock completed with the one good push
  EXPECT_EQ(handler_->counters().dropped_messages(), 4u);
}

}  // namespace
}  // namespace r2sp
