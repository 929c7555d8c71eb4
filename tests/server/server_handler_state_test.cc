// OPTIMIZER_STATE requests: a partition's state pulled (counters, moments, no weights) after a
// script's Adam updates; a script's checkpoint installed as the initial value and state, from
// which the next update is the one an uninterrupted server makes, bit for bit, a later INIT
// ignored; malformed requests refused with the state untouched.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "proto/checkpoint.pb.h"
#include "server/server_handler.h"
#include "tests/testing/fakes.h"

namespace r2sp {
namespace {

using testing::RecordingSink;
using testing::WorkerRequest;

constexpr size_t kN = 4;
const std::vector<float> kInit = {1, -2, 0.5f, 3};

std::string Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

class ServerHandlerStateTest : public ::testing::Test {
 protected:
  ServerHandlerStateTest() {
    proto::TensorSpec t;
    t.set_name("w");
    t.set_num_elements(kN);
    layout_ = std::make_unique<ModelLayout>(*ModelLayout::Create({t}, kN * sizeof(float), 1));
    proto::OptimizerRun* run = adam_.add_runs();
    run->set_end(kN);
    run->mutable_settings()->set_kind(proto::OPTIMIZER_ADAM);
    run->mutable_settings()->set_lr(0.125);
    run->mutable_settings()->set_beta1(0.9);
    run->mutable_settings()->set_beta2(0.999);
    run->mutable_settings()->set_eps(1e-8);
  }

  std::unique_ptr<ServerHandler> MakeHandler(proto::SyncMode sync, bool init = true) {
    ServerOptions options;
    options.sync = sync;
    auto handler = std::make_unique<ServerHandler>(options);
    handler->Configure(0, ServerPeers{"scheduler", {"w", "w"}}, *layout_);
    if (init) {
      Message m = WorkerRequest(proto::PUSH, 0, 0);
      m.header.mutable_push()->set_init(true);
      m.payload.emplace_back(kInit.data(), kN * sizeof(float));
      EXPECT_TRUE(Send(*handler, std::move(m)).ok());
    }
    return handler;
  }

  // One bsp clock of Adam: both workers push g.
  void Clock(ServerHandler& handler, int64_t clock, const std::vector<float>& g) {
    for (int w = 0; w < 2; ++w) {
      Message m = WorkerRequest(proto::PUSH, w, 0);
      m.header.set_clock(clock);
      *m.header.mutable_push()->mutable_optimizer() = adam_;
      m.payload.emplace_back(g.data(), g.size() * sizeof(float));
      ASSERT_TRUE(Send(handler, std::move(m)).ok());
    }
  }

  absl::StatusOr<proto::PartitionCheckpoint> PullState(ServerHandler& handler) {
    Responder r(&sink_, "w", WorkerRequest(proto::OPTIMIZER_STATE, 1, 0).header);
    handler.HandleRequest(WorkerRequest(proto::OPTIMIZER_STATE, 1, 0), std::move(r));
    std::vector<std::pair<std::string, Message>> replies = sink_.Take();
    if (replies.empty()) return absl::InternalError("no reply");
    const absl::Status status = FromReplyHeader(replies.back().second.header);
    if (!status.ok()) return status;
    proto::PartitionCheckpoint p;
    const zmq::message_t& frame = replies.back().second.payload.at(0);
    if (!p.ParseFromArray(frame.data(), frame.size())) return absl::InternalError("garbage");
    return p;
  }

  absl::Status SendState(ServerHandler& handler, const std::vector<std::string>& frames) {
    Message m = WorkerRequest(proto::OPTIMIZER_STATE, 0, 0);
    for (const std::string& f : frames) m.payload.emplace_back(f.data(), f.size());
    return Send(handler, std::move(m));
  }

  absl::Status Send(ServerHandler& handler, Message m) {
    return testing::HandleForStatus(handler, sink_, std::move(m));
  }

  RecordingSink sink_;
  std::unique_ptr<ModelLayout> layout_;
  proto::PartitionOptimizer adam_;
};

TEST_F(ServerHandlerStateTest, PullsTheCountersAndMomentsWithoutTheWeights) {
  auto handler = MakeHandler(proto::BSP);
  Clock(*handler, 0, {1, -1, 2, -2});
  const absl::StatusOr<proto::PartitionCheckpoint> state = PullState(*handler);
  ASSERT_TRUE(state.ok()) << state.status();
  const proto::PartitionCheckpoint held = handler->Snapshot().partitions(0);
  EXPECT_EQ(state->key(), 0u);
  EXPECT_EQ(state->updates(), 1);
  EXPECT_EQ(state->version(), 1);
  EXPECT_EQ(state->steps(), 1.0);
  EXPECT_EQ(state->clock(), 1);
  EXPECT_EQ(state->weights(), "");
  EXPECT_EQ(state->momentum(), held.momentum());
  EXPECT_EQ(state->second_moment(), held.second_moment());
  EXPECT_EQ(state->momentum(), Bytes({0.1f, -0.1f, 0.2f, -0.2f}));  // (1 - 0.9) * g
}

TEST_F(ServerHandlerStateTest, AScriptSgdsMomentumIsKeptWhereTheServersOwnSgdHasNone) {
  // The script's plain SGD with momentum runs on the server's own path (AsServerSgd); the
  // server's --momentum is 0, yet the momentum is the script's state: pulled and checkpointed.
  ServerOptions options;
  options.sync = proto::BSP;
  options.sgd.momentum = 0.0f;
  ServerHandler handler(options);
  handler.Configure(0, ServerPeers{"scheduler", {"w", "w"}}, *layout_);
  Message init = WorkerRequest(proto::PUSH, 0, 0);
  init.header.mutable_push()->set_init(true);
  init.payload.emplace_back(kInit.data(), kN * sizeof(float));
  ASSERT_TRUE(Send(handler, std::move(init)).ok());
  adam_.mutable_runs(0)->mutable_settings()->set_kind(proto::OPTIMIZER_SGD);
  adam_.mutable_runs(0)->mutable_settings()->set_momentum(0.5);
  Clock(handler, 0, {1, -1, 2, -2});
  Clock(handler, 1, {1, 1, 1, 1});
  const std::string momentum = Bytes({1.5f, 0.5f, 2, 0});  // 0.5 g0 + g1
  EXPECT_EQ(handler.Snapshot().partitions(0).momentum(), momentum);
  const absl::StatusOr<proto::PartitionCheckpoint> state = PullState(handler);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->momentum(), momentum);
}

TEST_F(ServerHandlerStateTest, AnInstalledCheckpointGoesOnAsTheUninterruptedServer) {
  auto uninterrupted = MakeHandler(proto::BSP);
  Clock(*uninterrupted, 0, {1, -1, 2, -2});
  proto::PartitionCheckpoint saved = uninterrupted->Snapshot().partitions(0);
  Clock(*uninterrupted, 1, {0.5f, 3, -1, 0.25f});

  auto resumed = MakeHandler(proto::BSP, /*init=*/false);
  ASSERT_TRUE(SendState(*resumed, {saved.SerializeAsString()}).ok());
  Message late_init = WorkerRequest(proto::PUSH, 0, 0);  // the first initial value won
  late_init.header.mutable_push()->set_init(true);
  late_init.payload.emplace_back(kInit.data(), kN * sizeof(float));
  ASSERT_TRUE(Send(*resumed, std::move(late_init)).ok());
  EXPECT_EQ(resumed->Snapshot().partitions(0).SerializeAsString(), saved.SerializeAsString());
  Clock(*resumed, 1, {0.5f, 3, -1, 0.25f});
  EXPECT_EQ(Bytes(*resumed->Weights(0)), Bytes(*uninterrupted->Weights(0)));
  EXPECT_EQ(resumed->Snapshot().SerializeAsString(), uninterrupted->Snapshot().SerializeAsString());
}

TEST_F(ServerHandlerStateTest, MalformedStatesAreRefusedAndChangeNothing) {
  auto handler = MakeHandler(proto::BSP, /*init=*/false);
  EXPECT_EQ(PullState(*handler).status(),
            absl::FailedPreconditionError("partition 0 has no initial value yet"));
  proto::PartitionCheckpoint state;
  state.set_weights(Bytes({1, 2, 3}));
  EXPECT_EQ(SendState(*handler, {state.SerializeAsString()}),
            absl::InvalidArgumentError("partition 0 has 12 bytes of weights, 0 of momentum and "
                                       "0 of second moment; it needs 16"));
  state.set_weights(Bytes(kInit));
  state.set_updates(2);  // more updates than its version
  EXPECT_EQ(SendState(*handler, {state.SerializeAsString()}),
            absl::InvalidArgumentError("partition 0's counters are out of range"));
  state.clear_updates();
  state.set_key(3);
  EXPECT_EQ(SendState(*handler, {state.SerializeAsString()}),
            absl::InvalidArgumentError("OPTIMIZER_STATE of partition 0 holds partition 3's "
                                       "state"));
  const std::string refused =
      "OPTIMIZER_STATE of partition 0 carries one serialized PartitionCheckpoint or nothing (";
  EXPECT_EQ(SendState(*handler, {"\xff\xff\xff"}),
            absl::InvalidArgumentError(refused + "1 frames that are not one)"));
  state.set_key(0);
  EXPECT_EQ(SendState(*handler, {state.SerializeAsString(), "x"}),
            absl::InvalidArgumentError(refused + "2 frames that are not one)"));
  EXPECT_EQ(PullState(*handler).status(),
            absl::FailedPreconditionError("partition 0 has no initial value yet"));

  auto easgd = MakeHandler(proto::EASGD);
  EXPECT_EQ(PullState(*easgd).status(),
            absl::InvalidArgumentError("easgd and eawild keep no optimizer state on the servers "
                                       "(they add to the centre)"));
}

}  // namespace
}  // namespace r2sp
