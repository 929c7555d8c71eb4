// The server's side of elastic averaging (easgd, eawild): a pushed elastic difference is added
// to the centre as it is, whatever the optimizer flags say; eawild adds each on arrival, easgd
// adds a round's sum once every live worker's difference is in (a dead worker's departure
// releases the round) and answers a round's pulls only then; sparse pushes are refused with
// the centre left as it was; a round or a push counts as period global-batch steps.
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "server/server_handler.h"
#include "tests/testing/fakes.h"

namespace r2sp {
namespace {

using testing::RecordingSink;
using testing::WorkerRequest;

class ServerHandlerElasticTest : public ::testing::Test {
 protected:
  void SetUpHandler(proto::SyncMode sync, int num_workers) {
    proto::TensorSpec t;
    t.set_name("w");
    t.set_num_elements(4);
    layout_ = std::make_unique<ModelLayout>(*ModelLayout::Create({t}, 16, 1));  // one partition
    ServerOptions options;
    options.sgd = {0.5f, 0.9f, 0.1f};  // the servers' optimizer: unused by elastic modes
    options.sync = sync;
    options.elastic_period = 4;
    handler_ = std::make_unique<ServerHandler>(options);
    std::vector<std::string> ids;
    for (int w = 0; w < num_workers; ++w) ids.push_back("w" + std::to_string(w));
    handler_->Configure(0, ServerPeers{"scheduler", ids}, *layout_);
  }

  // Sends `m` from worker `rank`; the status of its reply, or OK if it was parked.
  absl::Status Send(int rank, Message m) {
    Responder r(&sink_, "w" + std::to_string(rank), m.header);
    handler_->HandleRequest(std::move(m), std::move(r));
    replies_ = sink_.Take();
    if (replies_.empty()) return absl::OkStatus();
    return FromReplyHeader(replies_.back().second.header);
  }

  absl::Status Push(int rank, std::vector<float> values, int64_t clock, bool init = false,
                    float scale = 0) {
    Message m = WorkerRequest(proto::PUSH, rank, 0);
    m.header.set_clock(clock);
    if (init) m.header.mutable_push()->set_init(true);
    if (scale > 0) m.header.mutable_push()->set_scale(scale);
    m.payload.push_back(zmq::message_t(values.data(), values.size() * sizeof(float)));
    return Send(rank, std::move(m));
  }

  // A pull of the centre; true if it was answered (not parked), with the weights in *out.
  bool Pull(int rank, int64_t min_version, std::vector<float>* out, double* steps = nullptr) {
    Message m = WorkerRequest(proto::PULL, rank, 0);
    m.header.mutable_pull()->set_min_version(min_version);
    if (!Send(rank, std::move(m)).ok() || replies_.empty()) return false;
    const Message& reply = replies_.back().second;
    out->resize(4);
    std::memcpy(out->data(), reply.payload[0].data(), 4 * sizeof(float));
    if (steps != nullptr) *steps = reply.header.pull_reply().steps();
    return true;
  }

  std::vector<float> Weights() { return *handler_->Weights(0); }

  RecordingSink sink_;
  std::vector<std::pair<std::string, Message>> replies_;
  std::unique_ptr<ModelLayout> layout_;
  std::unique_ptr<ServerHandler> handler_;
};

TEST_F(ServerHandlerElasticTest, EawildAddsEachDifferenceOnArrival) {
  SetUpHandler(proto::EAWILD, 2);
  ASSERT_TRUE(Push(0, {1, 2, 3, 4}, 0, /*init=*/true).ok());
  ASSERT_TRUE(Push(1, {0.5f, -1, 0.25f, 0}, 0, false, /*scale=*/0.5f).ok());
  EXPECT_EQ(Weights(), (std::vector<float>{1.5f, 1, 3.25f, 4}));  // no lr, momentum, decay
  ASSERT_TRUE(Push(0, {0.1f, 0, 0, -4}, 0, false, /*scale=*/0.5f).ok());
  EXPECT_EQ(Weights(), (std::vector<float>{1.5f + 0.1f, 1, 3.25f, 0}));
  std::vector<float> centre;
  double steps = 0;
  ASSERT_TRUE(Pull(1, 0, &centre, &steps));  // never waits
  EXPECT_EQ(centre, Weights());
  EXPECT_EQ(steps, 4.0);  // two pushes of half a global batch, period 4
}

TEST_F(ServerHandlerElasticTest, EasgdAddsTheRoundsSumOnceEveryWorkerPushed) {
  SetUpHandler(proto::EASGD, 2);
  ASSERT_TRUE(Push(0, {1, 2, 3, 4}, 0, /*init=*/true).ok());
  ASSERT_TRUE(Push(0, {0.5f, 0.5f, 0.5f, 0.5f}, /*clock=*/0).ok());
  EXPECT_EQ(Weights(), (std::vector<float>{1, 2, 3, 4}));  // waits for worker 1
  std::vector<float> centre(4);
  EXPECT_FALSE(Pull(0, /*min_version=*/1, &centre));  // round 1's pull is parked
  ASSERT_TRUE(Push(1, {0.25f, -2, 0, 1}, /*clock=*/0).ok());
  // The push is acknowledged, then the parked pull answered with the round applied: the sum
  // of both differences, added.
  ASSERT_EQ(replies_.size(), 2u);
  const Message& released = replies_.back().second;
  ASSERT_EQ(released.header.type(), proto::PULL);
  std::memcpy(centre.data(), released.payload[0].data(), 4 * sizeof(float));
  const std::vector<float> want{1.75f, 0.5f, 3.5f, 5.5f};
  EXPECT_EQ(centre, want);
  EXPECT_EQ(Weights(), want);
  double steps = 0;
  ASSERT_TRUE(Pull(1, 1, &centre, &steps));
  EXPECT_EQ(steps, 4.0);  // one round of period 4
  // A second difference for the same round is refused.
  EXPECT_EQ(Push(0, {1, 1, 1, 1}, /*clock=*/0).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(ServerHandlerElasticTest, EasgdRoundDoesNotWaitForADeadWorker) {
  SetUpHandler(proto::EASGD, 3);
  ASSERT_TRUE(Push(0, {0, 0, 0, 0}, 0, /*init=*/true).ok());
  ASSERT_TRUE(Push(0, {1, 1, 1, 1}, 0).ok());
  ASSERT_TRUE(Push(2, {2, 2, 2, 2}, 0).ok());
  EXPECT_EQ(Weights(), (std::vector<float>{0, 0, 0, 0}));
  handler_->SetDepartedWorkers({1});
  EXPECT_EQ(Weights(), (std::vector<float>{3, 3, 3, 3}));
}

// A sparse difference (top-k ids and values; csc's chunks) is added where it has values, the
// rest of the centre unchanged.
TEST_F(ServerHandlerElasticTest, SparseDifferencesAreAddedAtTheirIds) {
  SetUpHandler(proto::EAWILD, 1);
  ASSERT_TRUE(Push(0, {1, 2, 3, 4}, 0, /*init=*/true).ok());
  Message topk = WorkerRequest(proto::PUSH, 0, 0);
  topk.header.set_codec(proto::TOPK);
  const uint32_t ids[2] = {1, 3};
  const float values[2] = {5, -0.5};
  topk.payload.push_back(zmq::message_t(ids, sizeof(ids)));
  topk.payload.push_back(zmq::message_t(values, sizeof(values)));
  ASSERT_TRUE(Send(0, std::move(topk)).ok());
  EXPECT_EQ(Weights(), (std::vector<float>{1, 7, 3, 3.5}));
  Message csc = WorkerRequest(proto::PUSH, 0, 0);
  csc.header.set_codec(proto::CSC);
  csc.header.mutable_push()->set_chunk_elements(2);
  const uint32_t chunk = 0;
  const float chunk_values[2] = {0.25, 1};
  csc.payload.push_back(zmq::message_t(&chunk, sizeof(chunk)));
  csc.payload.push_back(zmq::message_t(chunk_values, sizeof(chunk_values)));
  ASSERT_TRUE(Send(0, std::move(csc)).ok());
  EXPECT_EQ(Weights(), (std::vector<float>{1.25, 8, 3, 3.5}));
}

}  // namespace
}  // namespace r2sp
