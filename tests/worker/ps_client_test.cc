// The parameter-server client against a real ServerHandler over the in-process network: whole-
// model pushes and pulls across partitions, BSP pulls parked until their clock, the codecs
// (gradients encoded to fp16 on a device included), an embedding's non-zero rows sent alone, and
// a request to a server that never answers.
#include "worker/ps_client.h"

#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "common/codec/fp16.h"
#include "tests/worker/one_server.h"

namespace r2sp {
namespace {

// A server holding `layout` in asp, plain SGD at rate 1, each push one whole step.
std::unique_ptr<ServerHandler> AspServer(const ModelLayout& layout) {
  ServerOptions options;
  options.sync = proto::ASP;
  options.sgd = {/*learning_rate=*/1.0f, /*momentum=*/0.0f, /*weight_decay=*/0.0f};
  options.per_sample_updates = false;
  auto server = std::make_unique<ServerHandler>(options);
  server->Configure(0, ServerPeers{"scheduler", {"worker0"}}, layout);
  return server;
}

class PsClientTest : public ::testing::Test {
 protected:
  void SetUp(proto::SyncMode sync, proto::Codec push_codec = proto::FP32) {
    codec::CodecSpec spec;
    spec.codec = push_codec;
    SetUp(sync, spec);
  }
  void SetUp(proto::SyncMode sync, const codec::CodecSpec& push_codec) {
    // 10 floats in partitions of 4, 3 and 3 floats on the one server; lr 0.5.
    job_ = std::make_unique<testing::OneServer>(sync, /*learning_rate=*/0.5f, push_codec);
    layout_ = &job_->layout();
    server_ = &job_->server();
    ps_ = &job_->ps();
  }
  std::vector<float> ServerWeights() const { return job_->Weights(); }

  std::unique_ptr<testing::OneServer> job_;
  const ModelLayout* layout_ = nullptr;
  ServerHandler* server_ = nullptr;
  PsClient* ps_ = nullptr;
};

TEST_F(PsClientTest, PushedGradientIsAppliedToEveryPartition) {
  SetUp(proto::ASP);
  ASSERT_EQ(layout_->partitions().size(), 3u);
  std::vector<float> init(10), grad(10, 2.0f), pulled(10, -1.0f);
  for (int i = 0; i < 10; ++i) init[i] = static_cast<float>(i);
  ASSERT_TRUE(ps_->Push(init.data(), 0, /*init=*/true).Wait().ok());
  ASSERT_TRUE(ps_->Pull(pulled.data()).Wait().ok());
  EXPECT_EQ(pulled, init);
  ASSERT_TRUE(ps_->Push(grad.data(), 0).Wait().ok());
  ASSERT_TRUE(ps_->Pull(pulled.data()).Wait().ok());
  for (int i = 0; i < 10; ++i) EXPECT_FLOAT_EQ(pulled[i], i - 0.5f * 2.0f) << i;
  const PsClientCounters c = ps_->counters();
  EXPECT_EQ(c.pushes, 6u);  // two pushes of three partitions
  EXPECT_EQ(c.pulls, 6u);
  EXPECT_EQ(c.bytes_pushed, 2 * 10 * sizeof(float));
}

TEST_F(PsClientTest, BspPullWaitsForTheClockToComplete) {
  SetUp(proto::BSP);
  std::vector<float> init(10, 1.0f), grad(10, 1.0f), pulled(10);
  ASSERT_TRUE(ps_->Push(init.data(), 0, /*init=*/true).Wait().ok());
  PullOptions next_clock;
  next_clock.min_version = 1;
  Ticket pull = ps_->Pull(pulled.data(), next_clock);
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(pull.Done());  // parked on the server: clock 0 has no push yet
  ASSERT_TRUE(ps_->Push(grad.data(), 0).Wait().ok());
  ASSERT_TRUE(pull.Wait().ok());
  EXPECT_GT(pull.waited_seconds(), 0.0);
  for (float p : pulled) EXPECT_FLOAT_EQ(p, 0.5f);
}

TEST_F(PsClientTest, Fp16PushesAndPullsTravelInHalfTheBytes) {
  SetUp(proto::ASP, proto::FP16);
  std::vector<float> init(10), grad(10), pulled(10);
  for (int i = 0; i < 10; ++i) {
    init[i] = 1.0f / (i + 1);  // not representable in fp16: the init must still be exact
    grad[i] = 0.25f * i;       // representable: the step is exact
  }
  ASSERT_TRUE(ps_->Push(init.data(), 0, /*init=*/true).Wait().ok());
  ASSERT_TRUE(ps_->Push(grad.data(), 0).Wait().ok());
  const std::optional<std::vector<float>> held = server_->Weights(0);
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ((*held)[1], 0.5f - 0.5f * 0.25f);
  PullOptions half;
  half.codec = proto::FP16;
  ASSERT_TRUE(ps_->Pull(pulled.data(), half).Wait().ok());
  for (int i = 0; i < 10; ++i) {
    const float exact = init[i] - 0.5f * grad[i];
    EXPECT_EQ(pulled[i], codec::HalfToFloat(codec::FloatToHalf(exact))) << i;
  }
  const PsClientCounters c = ps_->counters();
  EXPECT_EQ(c.bytes_pushed, 10 * sizeof(float) + 10 * sizeof(uint16_t));  // init fp32, grad fp16
  EXPECT_EQ(c.bytes_pulled, 10 * sizeof(uint16_t));
}

// A gradient a device encoded already (HostGradient::Fp16) goes as it is: the server applies
// exactly what the host's encoding of the same gradient gives, in the same bytes.
TEST_F(PsClientTest, GradientsEncodedOnTheDeviceGoAsTheyAreInFp16Pushes) {
  std::vector<float> init(10), grad(10);
  for (int i = 0; i < 10; ++i) {
    init[i] = 1.0f / (i + 1);
    grad[i] = 0.1f * i - 0.37f;  // rounded by the encoding
  }
  std::vector<uint16_t> half(10);
  codec::EncodeFp16(grad.data(), grad.size(), half.data());
  std::vector<std::vector<float>> weights;
  std::vector<uint64_t> bytes;
  for (const bool encoded : {false, true}) {
    SetUp(proto::ASP, proto::FP16);
    ASSERT_TRUE(ps_->Push(init.data(), 0, /*init=*/true).Wait().ok());
    const HostGradient g = encoded ? HostGradient::Fp16(half.data()) : HostGradient(grad.data());
    ASSERT_TRUE(ps_->Push(g, 0).Wait().ok());
    weights.push_back(ServerWeights());
    bytes.push_back(ps_->counters().bytes_pushed);
  }
  EXPECT_EQ(weights[1], weights[0]);
  EXPECT_EQ(bytes[1], bytes[0]);
  EXPECT_NE(weights[1][0], init[0]);  // the gradient was applied
}

TEST_F(PsClientTest, GradientsEncodedAlreadyGoOnlyInFp16Pushes) {
  SetUp(proto::ASP, proto::FP32);
  std::vector<float> init(10, 1.0f);
  std::vector<uint16_t> half(10, codec::FloatToHalf(0.5f));
  ASSERT_TRUE(ps_->Push(init.data(), 0, /*init=*/true).Wait().ok());
  absl::Status status = ps_->Push(HostGradient::Fp16(half.data()), 0).Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("FP32"), std::string::npos) << status;
  SetUp(proto::ASP, proto::FP16);
  status = ps_->Push(HostGradient::Fp16(half.data()), 0, /*init=*/true).Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;  // init is fp32
  EXPECT_EQ(ps_->counters().pushes, 0u);  // nothing was sent
  EXPECT_EQ(server_->counters().pushes(), 0u);
}

// fp16 deltas: the first pull brings whole fp32 weights, later ones half the bytes with the
// weights within binary16's rounding of each change; a pull of another codec in between makes
// the next delta pull whole again.
TEST_F(PsClientTest, Fp16DeltaPullsSendWholeWeightsFirstThenDeltas) {
  SetUp(proto::ASP);
  std::vector<float> init(10), grad(10, 0.001f), pulled(10);
  for (int i = 0; i < 10; ++i) init[i] = 1.0f / (i + 1);
  ASSERT_TRUE(ps_->Push(init.data(), 0, /*init=*/true).Wait().ok());
  PullOptions delta;
  delta.codec = proto::FP16_DELTA;
  ASSERT_TRUE(ps_->Pull(pulled.data(), delta).Wait().ok());
  EXPECT_EQ(pulled, init);
  EXPECT_EQ(ps_->counters().bytes_pulled, 10 * sizeof(float));
  for (int step = 1; step <= 3; ++step) {
    ASSERT_TRUE(ps_->Push(grad.data(), step).Wait().ok());
    ASSERT_TRUE(ps_->Pull(pulled.data(), delta).Wait().ok());
    const std::vector<float> held = ServerWeights();
    for (int i = 0; i < 10; ++i) EXPECT_NEAR(pulled[i], held[i], 1e-6f) << step << " " << i;
  }
  EXPECT_EQ(ps_->counters().bytes_pulled, 10 * sizeof(float) + 3 * 10 * sizeof(uint16_t));
  ASSERT_TRUE(ps_->Pull(pulled.data()).Wait().ok());  // fp32, as a final pull
  ASSERT_TRUE(ps_->Pull(pulled.data(), delta).Wait().ok());
  EXPECT_EQ(ps_->counters().bytes_pulled, 3 * 10 * sizeof(float) + 3 * 10 * sizeof(uint16_t));
  EXPECT_EQ(pulled, ServerWeights());
}

// PushThenPull: each partition is pulled once its own push is done, so in bsp every pull sees
// its clock applied, and the push ticket ends before (or with) the pull ticket.
TEST_F(PsClientTest, PushThenPullPullsEachPartitionAfterItsPush) {
  SetUp(proto::BSP);
  std::vector<float> init(10, 1.0f), grad(10), pulled(10, -1.0f);
  for (int i = 0; i < 10; ++i) grad[i] = 0.5f * i;
  ASSERT_TRUE(ps_->Push(init.data(), 0, /*init=*/true).Wait().ok());
  for (int clock = 0; clock < 3; ++clock) {
    PullOptions next;
    next.min_version = clock + 1;
    PsClient::Exchange exchange =
        ps_->PushThenPull(grad.data(), clock, /*scale=*/0.0f, pulled.data(), next);
    ASSERT_TRUE(exchange.push.Wait().ok());
    ASSERT_TRUE(exchange.pull.Wait().ok());
    for (int i = 0; i < 10; ++i) {
      EXPECT_FLOAT_EQ(pulled[i], 1.0f - 0.5f * (clock + 1) * grad[i]) << clock << " " << i;
    }
  }
  const PsClientCounters c = ps_->counters();
  EXPECT_EQ(c.pushes, 3u + 3 * 3);
  EXPECT_EQ(c.pulls, 3u * 3);
}

TEST_F(PsClientTest, TopKPushesSendTheLargestValuesAndKeepTheRestForLater) {
  // 10 floats in partitions of 4, 3 and 3; topk 0.5 exact sends 2 values of each.
  SetUp(proto::ASP, *codec::ParseCodecSpec("push_codec", "topk:0.5,exact"));
  std::vector<float> zero(10, 0.0f), pulled(10);
  ASSERT_TRUE(ps_->Push(zero.data(), 0, /*init=*/true).Wait().ok());
  const std::vector<float> grad = {1, -8, 2, 4, 0, 0, 6, -2, 3, 1};
  ASSERT_TRUE(ps_->Push(grad.data(), 0).Wait().ok());
  ASSERT_TRUE(ps_->Pull(pulled.data()).Wait().ok());
  // Sent: -8 and 4; 6 and the first 0 (ties go to the lower index); 3 and -2 (at lr 0.5).
  EXPECT_EQ(pulled, (std::vector<float>{0, 4, 0, -2, 0, 0, -3, 1, -1.5f, 0}));
  EXPECT_EQ(ps_->counters().bytes_pushed, 10 * sizeof(float) + 6 * 8);  // init + (id, value)s
  // Error feedback: a zero gradient next sends what was held back (2 and 1; 0s; 1 and a 0).
  ASSERT_TRUE(ps_->Push(zero.data(), 1).Wait().ok());
  ASSERT_TRUE(ps_->Pull(pulled.data()).Wait().ok());
  EXPECT_EQ(pulled, (std::vector<float>{-0.5f, 4, -1, -2, 0, 0, -3, 1, -1.5f, -0.5f}));
}

// --dense_below: the tensors smaller than the limit go whole in every top-k push, besides
// the selection. Model: w (6 values, split 3 + 3) and two 2-value tensors sharing a partition.
TEST(PsClientDenseTest, TopKSendsSmallTensorsWholeBesidesTheSelection) {
  std::vector<proto::TensorSpec> model(3);
  model[0].set_name("w"), model[0].set_num_elements(6);
  model[1].set_name("b"), model[1].set_num_elements(2);
  model[2].set_name("c"), model[2].set_num_elements(2);
  const ModelLayout layout = *ModelLayout::Create(model, /*partition_bytes=*/16, 1);
  ASSERT_EQ(layout.partitions().size(), 3u);
  std::unique_ptr<ServerHandler> server = AspServer(layout);
  testing::InProcessNetwork network;
  network.Serve("server0", server.get());
  PsClientOptions options;
  options.push_codec = *codec::ParseCodecSpec("push_codec", "topk:0.25,exact");
  options.dense_below = 3;
  PsClient ps(network.Client("worker0"), &layout, {"server0"}, options);
  std::vector<float> zero(10, 0.0f);
  ASSERT_TRUE(ps.Push(zero.data(), 0, /*init=*/true).Wait().ok());
  const std::vector<float> grad = {1, 5, 2, 3, 1, 1, 1, 2, 3, 4};
  ASSERT_TRUE(ps.Push(grad.data(), 0).Wait().ok());
  std::vector<float> w;
  for (const Partition& p : layout.partitions()) {
    const std::vector<float> part = *server->Weights(p.key);
    w.insert(w.end(), part.begin(), part.end());
  }
  // w: one value a partition (5, then 3); b and c: every value, though top-k picks one.
  EXPECT_EQ(w, (std::vector<float>{0, -5, 0, -3, 0, 0, -1, -2, -3, -4}));
  EXPECT_EQ(ps.counters().bytes_pushed, 10 * sizeof(float) + 6 * 8);  // init + (id, value)s
}

TEST_F(PsClientTest, CscPushesSendWholeChunksAndTheDensityCanChange) {
  // Partitions of 4, 3 and 3 values in chunks of 2 (the last of each of the 3-value ones
  // short): csc 0.5 sends the larger chunk of each. Then density 1 sends everything held back.
  SetUp(proto::BSP, *codec::ParseCodecSpec("push_codec", "csc:0.5,chunk=2,fp16"));
  std::vector<float> zero(10, 0.0f), pulled(10);
  ASSERT_TRUE(ps_->Push(zero.data(), 0, /*init=*/true).Wait().ok());
  const std::vector<float> grad = {1, 1, 2, -2, 3, 0, 0, 1, 2, 2};
  ASSERT_TRUE(ps_->Push(grad.data(), 0).Wait().ok());
  PullOptions clock1;
  clock1.min_version = 1;
  ASSERT_TRUE(ps_->Pull(pulled.data(), clock1).Wait().ok());
  EXPECT_EQ(pulled, (std::vector<float>{0, 0, -1, 1, -1.5f, 0, 0, -0.5f, -1, 0}));
  ps_->set_push_density(1.0);
  ASSERT_TRUE(ps_->Push(zero.data(), 1).Wait().ok());
  clock1.min_version = 2;
  ASSERT_TRUE(ps_->Pull(pulled.data(), clock1).Wait().ok());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(pulled[i], -0.5f * grad[i]) << i;
}

// An embedding table (8 rows of 64) and a bias (64) in one partition of 9 chunks of
// PsClient::kRowChunk: after PushNonzeroRowsOf, a gradient touching rows 2 and 5 (and the bias)
// sends those 3 chunks alone, their ids and values, and the server applies what the dense push
// would; with row 0 too, 4 chunks (half of 9, rounded down) still go alone; with rows 1 and 7
// as well, 6 chunks, the whole partition goes.
TEST(PsClientRowsTest, PushesOfAnEmbeddingsRowsSendTheNonZeroChunksAlone) {
  for (const proto::Codec codec : {proto::FP32, proto::FP16}) {
    SCOPED_TRACE(proto::Codec_Name(codec));
    std::vector<proto::TensorSpec> model(2);
    model[0].set_name("table"), model[0].set_num_elements(8 * 64);
    model[1].set_name("bias"), model[1].set_num_elements(64);
    const ModelLayout layout = *ModelLayout::Create(model, /*partition_bytes=*/1 << 20, 1);
    ASSERT_EQ(layout.partitions().size(), 1u);
    std::unique_ptr<ServerHandler> server = AspServer(layout);
    testing::InProcessNetwork network;
    network.Serve("server0", server.get());
    PsClientOptions options;
    options.push_codec.codec = codec;
    PsClient ps(network.Client("worker0"), &layout, {"server0"}, options);
    std::vector<float> weights(576, 0.0f), grad(576, 0.0f);
    ASSERT_TRUE(ps.Push(weights.data(), 0, /*init=*/true).Wait().ok());
    ps.PushNonzeroRowsOf(/*offset=*/0, /*count=*/8 * 64);
    for (int row : {2, 5, 8}) {  // 8: the bias
      for (int i = 0; i < 64; ++i) grad[row * 64 + i] = 0.25f * (i % 5) - 0.5f;
    }
    const size_t value_bytes = codec == proto::FP16 ? 2 : 4;
    ASSERT_TRUE(ps.Push(grad.data(), 0).Wait().ok());
    EXPECT_EQ(ps.counters().bytes_pushed, 576 * 4 + 3 * 4 + 3 * 64 * value_bytes);
    for (int i = 0; i < 576; ++i) weights[i] -= grad[i];
    EXPECT_EQ(*server->Weights(0), weights);
    grad[3] = 1.0f;  // row 0 too: 4 chunks, still at most half of the 9
    ASSERT_TRUE(ps.Push(grad.data(), 1).Wait().ok());
    const size_t sent = 576 * 4 + 3 * 4 + 3 * 64 * value_bytes + 4 * 4 + 4 * 64 * value_bytes;
    EXPECT_EQ(ps.counters().bytes_pushed, sent);
    for (int i = 0; i < 576; ++i) weights[i] -= grad[i];
    EXPECT_EQ(*server->Weights(0), weights);
    grad[64] = grad[7 * 64] = 1.0f;  // rows 1 and 7: 6 chunks, the whole partition goes
    ASSERT_TRUE(ps.Push(grad.data(), 2).Wait().ok());
    EXPECT_EQ(ps.counters().bytes_pushed, sent + 576 * value_bytes);
    for (int i = 0; i < 576; ++i) weights[i] -= grad[i];
    EXPECT_EQ(*server->Weights(0), weights);
  }
}

// A whole-model pull can be waited on partition by partition (a forward overlapping the pull):
// in bsp each partition's pull is answered once that partition's clock is complete.
TEST_F(PsClientTest, PullCanBeWaitedOnPartitionByPartition) {
  SetUp(proto::BSP);
  std::vector<float> init(10, 1.0f), grad(10, 1.0f), pulled(10, -1.0f);
  ASSERT_TRUE(ps_->Push(init.data(), 0, /*init=*/true).Wait().ok());
  PullOptions next_clock;
  next_clock.min_version = 1;
  Ticket pull = ps_->Pull(pulled.data(), next_clock);
  EXPECT_EQ(pull.finished(), absl::InfinitePast());
  ASSERT_TRUE(ps_->PushPartition(1, grad.data() + 4, 0).Wait().ok());
  ASSERT_TRUE(pull.WaitKeys(1, 1).ok());
  for (int i = 4; i < 7; ++i) EXPECT_FLOAT_EQ(pulled[i], 0.5f) << i;
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_FALSE(pull.Done());  // partitions 0 and 2 are still parked
  EXPECT_FLOAT_EQ(pulled[0], -1.0f);
  ASSERT_TRUE(ps_->PushPartition(0, grad.data(), 0).Wait().ok());
  ASSERT_TRUE(pull.WaitKeys(0, 1).ok());
  EXPECT_FALSE(pull.Done());
  ASSERT_TRUE(ps_->PushPartition(2, grad.data() + 7, 0).Wait().ok());
  const absl::Time before = absl::Now();
  ASSERT_TRUE(pull.WaitKeys(2, 2).ok());
  EXPECT_TRUE(pull.Done());
  EXPECT_LE(pull.finished(), absl::Now());
  EXPECT_GE(pull.finished() + absl::Milliseconds(50), before);
  for (float p : pulled) EXPECT_FLOAT_EQ(p, 0.5f);
}

TEST_F(PsClientTest, ServerThatNeverAnswersEndsTheTicketWithDeadlineExceeded) {
  SetUp(proto::ASP);
  PsClientOptions options;
  options.request_timeout = absl::Milliseconds(100);
  PsClient lost(job_->network().Client("worker0"), layout_, std::vector<std::string>{"nobody"},
                options);
  std::vector<float> pulled(10);
  const absl::Status s = lost.Pull(pulled.data()).Wait();
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  // Waiting on one partition ends with an error too.
  const absl::Status one = lost.Pull(pulled.data()).WaitKeys(2, 2);
  EXPECT_TRUE(absl::IsDeadlineExceeded(one)) << one;
  // A push that is never answered: its partition is not pulled, and both tickets end.
  std::vector<float> grad(10, 1.0f);
  PsClient::Exchange exchange = lost.PushThenPull(grad.data(), 0, 0.0f, pulled.data(), {});
  EXPECT_TRUE(absl::IsDeadlineExceeded(exchange.push.Wait()));
  EXPECT_TRUE(absl::IsAborted(exchange.pull.Wait()));
  EXPECT_EQ(pulled, std::vector<float>(10, 0.0f));
  EXPECT_EQ(lost.counters().pulls, 0u);
}

}  // namespace
}  // namespace r2sp
