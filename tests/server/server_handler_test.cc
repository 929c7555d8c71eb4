// The server's protocol logic without sockets: pushes, pulls, BSP parking, rejections; and
// --apply_threads giving the same weights as one thread; invalid options refused at
// construction.
#include "server/server_handler.h"

#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/fakes.h"

namespace r2sp {
namespace {

using testing::RecordingSink;
using testing::WorkerRequest;

class ServerHandlerTest : public ::testing::Test {
 protected:
  void SetUpHandler(proto::SyncMode sync, int num_workers, float momentum = 0.0f,
                    bool per_sample_updates = true) {
    proto::TensorSpec t;
    t.set_name("w");
    t.set_num_elements(8);
    auto layout = ModelLayout::Create({t}, 16, 1);  // two partitions of 4 floats, server 0
    ASSERT_TRUE(layout.ok());
    layout_ = std::make_unique<ModelLayout>(*layout);
    ServerOptions options;
    options.sgd = {0.5f, momentum, 0.0f};
    options.sync = sync;
    options.per_sample_updates = per_sample_updates;
    // The handler's time is the test's: how long a pull was parked is exact.
    handler_ = std::make_unique<ServerHandler>(options, [this] { return now_; });
    handler_->Configure(0, ServerPeers{"scheduler", testing::WorkerIds(num_workers)}, *layout_);
  }

  void Push(int rank, uint64_t key, std::vector<float> values, int64_t clock = 0,
            bool init = false, float scale = 0.0f) {
    Message m = WorkerRequest(proto::PUSH, rank, key);
    m.header.set_clock(clock);
    if (init) m.header.mutable_push()->set_init(true);
    if (scale != 0) m.header.mutable_push()->set_scale(scale);
    m.payload.push_back(zmq::message_t(values.data(), values.size() * sizeof(float)));
    Responder r(&sink_, "w" + std::to_string(rank), m.header);
    handler_->HandleRequest(std::move(m), std::move(r));
  }

  void Pull(int rank, uint64_t key, int64_t min_version = 0, int64_t min_clock = 0) {
    Message m = WorkerRequest(proto::PULL, rank, key);
    m.header.mutable_pull()->set_min_version(min_version);
    m.header.mutable_pull()->set_min_clock(min_clock);
    Responder r(&sink_, "w" + std::to_string(rank), m.header);
    handler_->HandleRequest(std::move(m), std::move(r));
  }

  void PredictedPull(int rank, uint64_t key, float fraction, int updates) {
    Message m = WorkerRequest(proto::PULL, rank, key);
    m.header.mutable_pull()->set_predict_fraction(fraction);
    m.header.mutable_pull()->set_predict_updates(updates);
    Responder r(&sink_, "w" + std::to_string(rank), m.header);
    handler_->HandleRequest(std::move(m), std::move(r));
  }

  // A request over the connection `routing_id` (by default, no registered peer's).
  void Handle(Message m, const std::string& routing_id = "x") {
    Responder r(&sink_, routing_id, m.header);
    handler_->HandleRequest(std::move(m), std::move(r));
  }

  static std::vector<float> Values(const Message& reply) {
    const float* p = static_cast<const float*>(reply.payload.at(0).data());
    return std::vector<float>(p, p + reply.payload[0].size() / sizeof(float));
  }

  absl::Time now_ = absl::FromUnixSeconds(1000);
  RecordingSink sink_;
  std::unique_ptr<ModelLayout> layout_;
  std::unique_ptr<ServerHandler> handler_;
};

TEST_F(ServerHandlerTest, AsyncAppliesEachPushOnArrival) {
  SetUpHandler(proto::ASP, 2);
  Push(0, 0, {1, 1, 1, 1}, 0, /*init=*/true);
  Push(1, 0, {9, 9, 9, 9}, 0, /*init=*/true);  // ignored: first init wins
  Push(0, 0, {2, 4, 6, 8});
  Push(1, 0, {2, 2, 2, 2});
  Pull(0, 0);
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 5u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(replies[i].second.header.code(), proto::OK);
  EXPECT_EQ(replies[4].first, "w0");
  EXPECT_EQ(replies[4].second.header.clock(), 2);  // two updates applied
  EXPECT_EQ(Values(replies[4].second), (std::vector<float>{-1, -2, -3, -4}));
}

TEST_F(ServerHandlerTest, BspAveragesOnceEveryWorkerPushedAndParksPulls) {
  SetUpHandler(proto::BSP, 2);
  Push(0, 1, {0, 0, 0, 0}, 0, /*init=*/true);
  Push(0, 1, {2, 2, 2, 2}, /*clock=*/0);
  Pull(0, 1, /*min_version=*/1);  // parked: worker 1 has not pushed clock 0
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 2u);
  Push(1, 1, {4, 4, 4, 4}, 0);
  replies = sink_.Take();
  ASSERT_EQ(replies.size(), 2u);  // the push ack and the released pull
  const Message& pull = replies[1].second;
  EXPECT_EQ(pull.header.clock(), 1);
  EXPECT_EQ(Values(pull), (std::vector<float>{-1.5f, -1.5f, -1.5f, -1.5f}));  // -0.5 * avg 3
}

TEST_F(ServerHandlerTest, BspRejectsDuplicateAndFutureClocks) {
  SetUpHandler(proto::BSP, 2);
  Push(0, 0, {0, 0, 0, 0}, 0, true);
  Push(0, 0, {1, 1, 1, 1}, 0);
  Push(0, 0, {1, 1, 1, 1}, 0);
  Push(1, 0, {1, 1, 1, 1}, 5);
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 4u);
  EXPECT_EQ(replies[2].second.header.code(), proto::FAILED_PRECONDITION);
  EXPECT_EQ(replies[3].second.header.code(), proto::FAILED_PRECONDITION);
  EXPECT_EQ(handler_->counters().dropped_messages(), 2u);
}

TEST_F(ServerHandlerTest, RejectsBadRequestsAndKeepsServing) {
  SetUpHandler(proto::ASP, 2);
  Push(0, 0, {0, 0, 0, 0}, 0, true);
  Push(0, 0, {1, 2, 3});            // wrong size
  Push(0, 99, {1, 2, 3, 4});        // unknown key
  Push(7, 0, {1, 2, 3, 4});         // unknown rank
  Push(0, 1, {1, 2, 3, 4});         // not initialised
  Message server_push = WorkerRequest(proto::PUSH, 0, 0);
  server_push.header.set_sender_role(proto::SERVER);
  Handle(std::move(server_push));
  Message register_msg = WorkerRequest(proto::REGISTER, 0, 0);
  Handle(std::move(register_msg));
  Message pull_with_payload = WorkerRequest(proto::PULL, 0, 0);
  pull_with_payload.payload.emplace_back(4);
  Handle(std::move(pull_with_payload), "w0");
  Pull(0, 0);
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 9u);
  EXPECT_EQ(replies[1].second.header.code(), proto::INVALID_ARGUMENT);
  EXPECT_EQ(replies[2].second.header.code(), proto::INVALID_ARGUMENT);
  EXPECT_EQ(replies[3].second.header.code(), proto::INVALID_ARGUMENT);
  EXPECT_EQ(replies[4].second.header.code(), proto::FAILED_PRECONDITION);
  EXPECT_EQ(replies[5].second.header.code(), proto::PERMISSION_DENIED);
  EXPECT_EQ(replies[6].second.header.code(), proto::INVALID_ARGUMENT);
  EXPECT_EQ(replies[7].second.header.code(), proto::INVALID_ARGUMENT);
  EXPECT_EQ(replies[8].second.header.code(), proto::OK);
  EXPECT_EQ(Values(replies[8].second), (std::vector<float>{0, 0, 0, 0}));
}

TEST_F(ServerHandlerTest, PulledFrameIsNotTornByLaterUpdates) {
  SetUpHandler(proto::ASP, 1);
  Push(0, 0, {0, 0, 0, 0}, 0, true);
  Pull(0, 0);
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 2u);
  Message& pulled = replies[1].second;  // still "in flight": its frame is alive
  Push(0, 0, {2, 2, 2, 2});              // must not write into the in-flight buffer
  EXPECT_EQ(Values(pulled), (std::vector<float>{0, 0, 0, 0}));
  EXPECT_EQ(*handler_->Weights(0), (std::vector<float>{-1, -1, -1, -1}));
  pulled.payload.clear();                // released: the next update may reuse buffers
  Push(0, 0, {2, 2, 2, 2});
  EXPECT_EQ(*handler_->Weights(0), (std::vector<float>{-2, -2, -2, -2}));
}

// SSP with staleness 2: worker 0 runs ahead; its pull after its 4th push (min_clock = 4 - 2)
// parks until the slowest live worker has pushed twice, and is answered the moment it has,
// saying how long it waited.
TEST_F(ServerHandlerTest, SspBlocksAWorkerMoreThanStalenessAheadUntilTheSlowestAdvances) {
  SetUpHandler(proto::SSP, 2);
  Push(0, 0, {0, 0, 0, 0}, 0, true);
  sink_.Take();
  const int s = 2;
  for (int c = 0; c < 4; ++c) {
    Push(0, 0, {1, 1, 1, 1}, c);
    Pull(0, 0, 0, c + 1 - s);  // what the worker asks before its next iteration
  }
  // Clocks 0 and 1 (min_clock <= 0) pass at once; at c = 2 and 3 worker 0 is more than s ahead.
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 6u);  // 4 push acks + 2 pulls
  now_ += absl::Milliseconds(1500);
  Push(1, 0, {1, 1, 1, 1}, 0);
  replies = sink_.Take();
  ASSERT_EQ(replies.size(), 2u);  // the push ack and the pull that needed min_clock 1
  EXPECT_DOUBLE_EQ(replies[1].second.header.pull_reply().waited_seconds(), 1.5);
  now_ += absl::Milliseconds(500);
  Push(1, 0, {1, 1, 1, 1}, 1);
  replies = sink_.Take();
  ASSERT_EQ(replies.size(), 2u);  // and now the one that needed 2
  EXPECT_EQ(replies[1].second.header.clock(), 6);  // every update applied on arrival
  EXPECT_DOUBLE_EQ(replies[1].second.header.pull_reply().waited_seconds(), 2.0);
}

TEST_F(ServerHandlerTest, SspStopsWaitingForADepartedWorker) {
  SetUpHandler(proto::SSP, 2);
  Push(0, 0, {0, 0, 0, 0}, 0, true);
  Push(0, 0, {1, 1, 1, 1}, 0);
  Push(0, 0, {1, 1, 1, 1}, 1);
  Pull(0, 0, 0, 2);  // staleness 0: waits for worker 1
  EXPECT_EQ(sink_.Take().size(), 3u);
  handler_->SetDepartedWorkers({1});
  EXPECT_EQ(sink_.Take().size(), 1u);
}

TEST_F(ServerHandlerTest, BspShrinksToTheLiveWorkersWhenOneDies) {
  SetUpHandler(proto::BSP, 3);
  Push(0, 0, {0, 0, 0, 0}, 0, true);
  Push(0, 0, {3, 3, 3, 3}, 0);
  Push(1, 0, {6, 6, 6, 6}, 0);
  Pull(0, 0, 1);
  EXPECT_EQ(sink_.Take().size(), 3u);  // init, 2 acks; the pull waits for worker 2
  handler_->SetDepartedWorkers({2});
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(Values(replies[0].second), (std::vector<float>{-2.25f, -2.25f, -2.25f, -2.25f}));
  // Later clocks complete with the two live workers alone.
  Push(1, 0, {2, 2, 2, 2}, 1);
  Push(0, 0, {2, 2, 2, 2}, 1);
  Pull(1, 0, 2);
  replies = sink_.Take();
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_EQ(Values(replies[2].second), (std::vector<float>{-3.25f, -3.25f, -3.25f, -3.25f}));
  handler_->SetDepartedWorkers({2});  // idempotent
}

TEST_F(ServerHandlerTest, WeightedGradientsAreSummedAsGiven) {
  SetUpHandler(proto::BSP, 2);
  Push(0, 0, {0, 0, 0, 0}, 0, true);
  Push(0, 0, {4, 4, 4, 4}, 0, false, 0.25f);  // b_0 / B = 1/4
  Push(1, 0, {8, 8, 8, 8}, 0, false, 0.75f);  // b_1 / B = 3/4
  Pull(0, 0, 1);
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 4u);
  // Global-batch average 0.25 * 4 + 0.75 * 8 = 7; lr 0.5.
  EXPECT_EQ(Values(replies[3].second), (std::vector<float>{-3.5f, -3.5f, -3.5f, -3.5f}));
  SetUpHandler(proto::ASP, 1);
  Push(0, 0, {0, 0, 0, 0}, 0, true);
  Push(0, 0, {4, 4, 4, 4}, 0, false, 0.5f);
  Push(0, 0, {4, 4, 4, 4}, 0, false, -1.0f);  // refused
  Push(0, 0, {4, 4, 4, 4}, 0, false, 1.5f);   // refused: more than a whole step
  replies = sink_.Take();
  ASSERT_EQ(replies.size(), 4u);
  EXPECT_EQ(replies[2].second.header.code(), proto::INVALID_ARGUMENT);
  EXPECT_EQ(replies[3].second.header.code(), proto::INVALID_ARGUMENT);
  EXPECT_EQ(*handler_->Weights(0), (std::vector<float>{-1, -1, -1, -1}));
}

// Asynchronous pushes are fractions of a global-batch step: with momentum, two pushes of half
// a step each follow StepForFraction, not two whole steps; --noper_sample_updates restores them.
TEST_F(ServerHandlerTest, AsyncPushesAreFractionsOfAStep) {
  const SgdOptions sgd{0.5f, 0.9f, 0.0f};
  const std::vector<float> g = {1, 2, 3, 4};
  for (bool per_sample : {true, false}) {
    SetUpHandler(proto::R2SP, 2, 0.9f, per_sample);
    Push(0, 0, {0, 0, 0, 0}, 0, true);
    Push(0, 0, g, 0, false, 0.5f);
    Push(1, 0, g, 0, false, 0.5f);
    std::vector<float> w(4, 0.0f), m(4, 0.0f);
    const FractionalStep step = per_sample ? StepForFraction(sgd, 0.5f) : FractionalStep{sgd, 1};
    for (int i = 0; i < 2; ++i) {
      SgdApply(step.options, step.grad_scale, g.data(), w.data(), w.data(), m.data(), 4);
    }
    EXPECT_EQ(*handler_->Weights(0), w) << "per_sample=" << per_sample;
    // Two half steps from a cold buffer move less than two whole steps (0.5 * (1 + 1.9) * g).
    if (per_sample) {
      EXPECT_GT(w[0], -0.5f * 2.9f);
    }
    sink_.Take();
  }
}

// A predicted pull answers with the weights after the updates it names, computed from the
// momentum and the latest push's gradient; a plain pull still gets the current weights.
TEST_F(ServerHandlerTest, PredictedPullAnswersWithWhereTheWeightsWillBe) {
  const SgdOptions sgd{0.5f, 0.9f, 0.0f};
  SetUpHandler(proto::R2SP, 4, 0.9f);
  const std::vector<float> g = {1, 2, 3, 4};
  Push(0, 0, {0, 0, 0, 0}, 0, true);
  PredictedPull(0, 0, 0.75f, 3);  // starts keeping the gradient term; none yet
  Push(0, 0, g, 0, false, 0.25f);
  PredictedPull(0, 0, 0.75f, 3);
  Pull(0, 0);
  std::vector<std::pair<std::string, Message>> replies = sink_.Take();
  ASSERT_EQ(replies.size(), 5u);
  EXPECT_EQ(Values(replies[1].second), (std::vector<float>{0, 0, 0, 0}));
  // Expected: one quarter step, then the three quarter steps the prediction stands for.
  std::vector<float> w(4, 0.0f), m(4, 0.0f);
  const FractionalStep step = StepForFraction(sgd, 0.25f);
  SgdApply(step.options, step.grad_scale, g.data(), w.data(), w.data(), m.data(), 4);
  EXPECT_EQ(Values(replies[4].second), w);
  for (int j = 0; j < 3; ++j) {
    SgdApply(step.options, step.grad_scale, g.data(), w.data(), w.data(), m.data(), 4);
  }
  const std::vector<float> predicted = Values(replies[3].second);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(predicted[i], w[i], 1e-5) << i;
  EXPECT_EQ(*handler_->Weights(0), Values(replies[4].second));  // the weights did not move
}

// An asynchronous push from a worker whose last pull asked for predicted weights computes them
// in its update's pass (PartitionState::ApplyForeseeing): its next pull, and every other pull
// of that version asking the same, is sent that one buffer; a worker asking for another
// prediction gets its own. The values are those computed on demand (reference: a partition
// updated with Apply and asked afterwards).
TEST_F(ServerHandlerTest, PushComputesThePushersNextPredictedPull) {
  const SgdOptions sgd{0.5f, 0.9f, 0.0f};
  SetUpHandler(proto::R2SP, 4, 0.9f);
  const std::vector<float> g = {1, 2, 3, 4};
  Push(0, 0, {0, 0, 0, 0}, 0, true);
  PredictedPull(0, 0, 0.75f, 3);
  PredictedPull(1, 0, 0.5f, 2);
  Push(0, 0, g, 0, false, 0.25f);
  PredictedPull(0, 0, 0.75f, 3);
  PredictedPull(2, 0, 0.75f, 3);
  PredictedPull(1, 0, 0.5f, 2);
  std::vector<std::pair<std::string, Message>> replies = sink_.Take();
  ASSERT_EQ(replies.size(), 7u);
  const Message& foreseen = replies[4].second;
  EXPECT_EQ(foreseen.payload.at(0).data(), replies[5].second.payload.at(0).data());
  EXPECT_NE(foreseen.payload.at(0).data(), replies[6].second.payload.at(0).data());

  PartitionState reference(4);
  const std::vector<float> zeros(4, 0.0f);
  ASSERT_TRUE(reference.Init(zeros.data()));
  ASSERT_EQ(reference.PredictedPullFrame(PredictionFor(sgd, 0.25f, 3)).size(), 16u);
  const FractionalStep step = StepForFraction(sgd, 0.25f);
  reference.Apply(step.options, step.grad_scale, g.data());
  const auto values = [](const zmq::message_t& frame) {
    const float* p = static_cast<const float*>(frame.data());
    return std::vector<float>(p, p + 4);
  };
  EXPECT_EQ(Values(foreseen), values(reference.PredictedPullFrame(PredictionFor(sgd, 0.25f, 3))));
  EXPECT_EQ(Values(replies[6].second),
            values(reference.PredictedPullFrame(PredictionFor(sgd, 0.25f, 2))));
}

TEST_F(ServerHandlerTest, RejectsBadPredictedPulls) {
  SetUpHandler(proto::R2SP, 2);
  Push(0, 0, {0, 0, 0, 0}, 0, true);
  PredictedPull(0, 0, 1.5f, 1);   // fraction above 1
  PredictedPull(0, 0, 0.5f, 0);   // no updates
  PredictedPull(0, 0, -0.5f, 1);  // negative
  PredictedPull(0, 0, 0.5f, 1 << 20);
  SetUpHandler(proto::BSP, 2);
  PredictedPull(0, 0, 0.5f, 1);   // bsp has nothing to predict
  std::vector<std::pair<std::string, Message>> replies = sink_.Take();
  ASSERT_EQ(replies.size(), 6u);
  for (size_t i = 1; i < replies.size(); ++i) {
    EXPECT_EQ(replies[i].second.header.code(), proto::INVALID_ARGUMENT) << i;
  }
}

TEST_F(ServerHandlerTest, ShutdownOnlyFromScheduler) {
  SetUpHandler(proto::ASP, 1);
  Message bogus = WorkerRequest(proto::SHUTDOWN, 0, 0);
  Handle(std::move(bogus));
  EXPECT_FALSE(handler_->shutdown_requested().HasBeenNotified());
  Message real;
  real.header.set_type(proto::SHUTDOWN);
  real.header.set_sender_role(proto::SCHEDULER);
  Handle(std::move(real), "scheduler");
  EXPECT_TRUE(handler_->shutdown_requested().HasBeenNotified());
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[1].second.header.code(), proto::OK);
  EXPECT_TRUE(replies[1].second.header.has_counters());
}

TEST_F(ServerHandlerTest, SnapshotRestoresIntoAFreshServerWithStepsAndMomentum) {
  SetUpHandler(proto::ASP, 2, /*momentum=*/0.9f);
  for (uint64_t key : {0, 1}) Push(0, key, {1, 2, 3, 4}, 0, /*init=*/true);
  Push(0, 0, {1, 1, 1, 1}, 0, false, /*scale=*/0.5f);
  Push(1, 0, {2, 2, 2, 2}, 0, false, /*scale=*/0.5f);
  Push(1, 1, {1, 0, 0, 0}, 0, false, /*scale=*/0.5f);
  const proto::ShardCheckpoint shard = handler_->Snapshot();
  EXPECT_DOUBLE_EQ(handler_->Steps(), 0.5);  // partition 1 had half a step
  const std::vector<float> before = *handler_->Weights(0);
  sink_.Take();

  SetUpHandler(proto::ASP, 2, 0.9f);
  ASSERT_TRUE(handler_->Restore(shard).ok());
  EXPECT_EQ(*handler_->Weights(0), before);
  EXPECT_DOUBLE_EQ(handler_->Steps(), 0.5);
  // The same next push moves both servers alike: the momentum came back too.
  Push(0, 0, {1, 1, 1, 1}, 0, false, 0.5f);
  Pull(0, 0);
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_DOUBLE_EQ(replies[1].second.header.pull_reply().steps(), 1.5);
  SetUpHandler(proto::ASP, 2, 0.9f);
  for (uint64_t key : {0, 1}) Push(0, key, {1, 2, 3, 4}, 0, /*init=*/true);
  Push(0, 0, {1, 1, 1, 1}, 0, false, 0.5f);
  Push(1, 0, {2, 2, 2, 2}, 0, false, 0.5f);
  Push(0, 0, {1, 1, 1, 1}, 0, false, 0.5f);
  const std::vector<float> uninterrupted = *handler_->Weights(0);
  SetUpHandler(proto::ASP, 2, 0.9f);
  ASSERT_TRUE(handler_->Restore(shard).ok());
  Push(0, 0, {1, 1, 1, 1}, 0, false, 0.5f);
  EXPECT_EQ(*handler_->Weights(0), uninterrupted);
}

// Workers of a resumed job start at the checkpoint's steps, which pull replies carry as
// restored_steps: fixed however many pushes followed, and absent in a fresh job, where a fast
// worker's pushes may land before a slow worker's first pull (which once took them for a
// resume and skipped steps).
TEST_F(ServerHandlerTest, PullRepliesCarryTheRestoredStepsOnlyAfterARestore) {
  SetUpHandler(proto::ASP, 2);
  for (uint64_t key : {0, 1}) Push(0, key, {1, 2, 3, 4}, 0, /*init=*/true);
  for (int i = 0; i < 4; ++i) Push(0, 0, {1, 1, 1, 1}, 0, false, /*scale=*/0.5f);
  Pull(1, 0);
  auto replies = sink_.Take();
  EXPECT_DOUBLE_EQ(replies.back().second.header.pull_reply().steps(), 2.0);
  EXPECT_EQ(replies.back().second.header.pull_reply().restored_steps(), 0.0);
  const proto::ShardCheckpoint shard = handler_->Snapshot();

  SetUpHandler(proto::ASP, 2);
  ASSERT_TRUE(handler_->Restore(shard).ok());
  Push(0, 0, {1, 1, 1, 1}, 0, false, 0.5f);
  Pull(1, 0);
  replies = sink_.Take();
  EXPECT_DOUBLE_EQ(replies.back().second.header.pull_reply().steps(), 2.5);
  EXPECT_DOUBLE_EQ(replies.back().second.header.pull_reply().restored_steps(), 2.0);
}

TEST_F(ServerHandlerTest, RestoredBspPartitionDropsPushesForClocksItHoldsAlready) {
  SetUpHandler(proto::BSP, 2);
  for (uint64_t key : {0, 1}) Push(0, key, {0, 0, 0, 0}, 0, /*init=*/true);
  for (int w : {0, 1}) Push(w, 0, {1, 1, 1, 1}, 0);  // partition 0 completes clock 0
  proto::ShardCheckpoint shard = handler_->Snapshot();
  EXPECT_EQ(shard.partitions(0).key() == 0 ? shard.partitions(0).clock()
                                           : shard.partitions(1).clock(), 1);
  const std::vector<float> after_clock0 = *handler_->Weights(0);
  sink_.Take();
  SetUpHandler(proto::BSP, 2);
  ASSERT_TRUE(handler_->Restore(shard).ok());
  // Workers resume at clock 0 (partition 1's): partition 0 acknowledges and drops clock 0.
  for (int w : {0, 1}) Push(w, 0, {5, 5, 5, 5}, 0);
  for (const auto& [who, reply] : sink_.Take()) EXPECT_EQ(reply.header.code(), proto::OK) << who;
  EXPECT_EQ(*handler_->Weights(0), after_clock0);
  for (int w : {0, 1}) Push(w, 0, {1, 1, 1, 1}, 1);  // clock 1 is aggregated as usual
  Pull(0, 0, /*min_version=*/2);
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_EQ(replies[2].second.header.clock(), 2);
}

TEST_F(ServerHandlerTest, RestoreRefusesACheckpointOfAnotherShape) {
  SetUpHandler(proto::ASP, 1);
  for (uint64_t key : {0, 1}) Push(0, key, {1, 2, 3, 4}, 0, /*init=*/true);
  const proto::ShardCheckpoint good = handler_->Snapshot();
  auto refused = [this](proto::ShardCheckpoint shard, const std::string& why) {
    SetUpHandler(proto::ASP, 1);
    const absl::Status s = handler_->Restore(shard);
    EXPECT_FALSE(s.ok()) << why;
    EXPECT_FALSE(handler_->Weights(0).has_value() && (*handler_->Weights(0))[1] == 2.0f) << why;
  };
  proto::ShardCheckpoint shard = good;
  shard.mutable_partitions(0)->mutable_weights()->resize(8);
  refused(shard, "short weights");
  shard = good;
  shard.mutable_partitions(1)->set_key(7);
  refused(shard, "a key of another server");
  shard = good;
  shard.mutable_partitions()->RemoveLast();
  refused(shard, "a partition missing");
  shard = good;
  *shard.add_partitions() = good.partitions(0);
  refused(shard, "a partition twice");
  shard = good;
  shard.mutable_partitions(0)->set_steps(-1);
  refused(shard, "negative steps");
}

// The sender is the connection, not the header (authentication off): a worker's header over
// another connection, or the scheduler's over a worker's, is denied, counted and changes
// nothing.
TEST_F(ServerHandlerTest, HeadersClaimingAnotherPeerAreDenied) {
  SetUpHandler(proto::ASP, 2);
  Push(0, 0, {1, 1, 1, 1}, 0, true);
  sink_.Take();
  std::vector<float> poison = {1e9f, 1e9f, 1e9f, 1e9f};
  Message push = WorkerRequest(proto::PUSH, 0, 0);
  push.payload.push_back(zmq::message_t(poison.data(), 16));
  Handle(std::move(push), "w1");  // worker 1 claiming to be worker 0
  Message pull = WorkerRequest(proto::PULL, 1, 0);
  Handle(std::move(pull), "stranger");
  Message shutdown;
  shutdown.header.set_type(proto::SHUTDOWN);
  shutdown.header.set_sender_role(proto::SCHEDULER);
  Handle(std::move(shutdown), "w0");
  Message grow;
  grow.header.set_type(proto::MEMBERSHIP);
  grow.header.set_sender_role(proto::SCHEDULER);
  grow.header.mutable_membership()->set_num_workers(3);
  for (const char* id : {"w0", "w1", "stranger"}) grow.header.mutable_membership()->add_worker_ids(id);
  Handle(std::move(grow), "stranger");
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 4u);
  for (const auto& [to, reply] : replies) {
    EXPECT_EQ(reply.header.code(), proto::PERMISSION_DENIED) << to;
  }
  EXPECT_FALSE(handler_->shutdown_requested().HasBeenNotified());
  EXPECT_EQ(*handler_->Weights(0), std::vector<float>({1, 1, 1, 1}));
  EXPECT_EQ(handler_->counters().dropped_messages(), 4u);
  // The joiner "stranger" was not admitted: rank 2 does not exist.
  Handle(WorkerRequest(proto::PULL, 2, 0), "stranger");
  EXPECT_EQ(sink_.Take()[0].second.header.code(), proto::INVALID_ARGUMENT);
}

// MEMBERSHIP from the scheduler's connection admits a joiner over its own connection only, and
// never rebinds an existing rank.
TEST_F(ServerHandlerTest, MembershipBindsTheJoinersConnection) {
  SetUpHandler(proto::ASP, 1);
  Push(0, 0, {1, 1, 1, 1}, 0, true);
  Message grow;
  grow.header.set_type(proto::MEMBERSHIP);
  grow.header.set_sender_role(proto::SCHEDULER);
  grow.header.mutable_membership()->set_num_workers(2);
  grow.header.mutable_membership()->add_worker_ids("evil");  // rank 0 keeps "w0"
  grow.header.mutable_membership()->add_worker_ids("w1");
  Handle(std::move(grow), "scheduler");
  sink_.Take();
  Pull(1, 0);
  Handle(WorkerRequest(proto::PULL, 0, 0), "evil");
  Pull(0, 0);
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_EQ(replies[0].second.header.code(), proto::OK);
  EXPECT_EQ(replies[1].second.header.code(), proto::PERMISSION_DENIED);
  EXPECT_EQ(replies[2].second.header.code(), proto::OK);
}

// A worker parks at most a few pulls per partition: a flood of pulls that cannot be answered
// yet is refused instead of piling up.
TEST_F(ServerHandlerTest, ParkedPullsPerWorkerAreBounded) {
  SetUpHandler(proto::BSP, 1);
  Push(0, 0, {1, 1, 1, 1}, 0, true);
  sink_.Take();
  for (int i = 0; i < 100; ++i) Pull(0, 0, /*min_version=*/5);
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 96u);  // four parked, the rest refused at once
  for (const auto& [to, reply] : replies) {
    // Refused to the worker that asked, as an answer to its pull (the responder the pull was
    // to be parked with is given back for the refusal).
    EXPECT_EQ(to, "w0");
    EXPECT_EQ(reply.header.type(), proto::PULL);
    EXPECT_EQ(reply.header.code(), proto::FAILED_PRECONDITION);
    EXPECT_EQ(reply.header.error(), "worker 0 has 4 pulls of partition 0 waiting already");
  }
}

// A worker whose connection to a lost server was reset sends its pushes again, marked as
// retries; one the server applied already (the reply was lost) is acknowledged, not applied twice.
// A request meant for another rank (its worker's routing is stale: the endpoint passed to this
// server from a lost one) is refused UNAVAILABLE, which the worker retries, and changes
// nothing, even for a key this server holds; one meant for this rank is served.
TEST_F(ServerHandlerTest, RequestsMeantForAnotherServerAreRefusedAsUnavailable) {
  SetUpHandler(proto::ASP, 1);
  Push(0, 0, {0, 0, 0, 0}, 0, /*init=*/true);
  const std::vector<float> ones(4, 1.0f);
  auto request = [this, &ones](proto::MsgType type, int to_server) {
    Message m = WorkerRequest(type, 0, 0);
    m.header.set_to_server(to_server);
    if (type == proto::PUSH) m.payload.push_back(zmq::message_t(ones.data(), 4 * sizeof(float)));
    Handle(std::move(m), "w0");
  };
  request(proto::PUSH, 1);
  request(proto::PULL, 1);
  EXPECT_EQ(*handler_->Weights(0), (std::vector<float>{0, 0, 0, 0}));
  request(proto::PUSH, 0);
  request(proto::PULL, 0);
  const auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 5u);
  for (int i : {1, 2}) {
    EXPECT_EQ(replies[i].second.header.code(), proto::NOT_READY);  // UNAVAILABLE
    EXPECT_EQ(replies[i].second.header.error(), "a request for server 1 reached server 0");
  }
  EXPECT_EQ(replies[3].second.header.code(), proto::OK);
  EXPECT_EQ(replies[4].second.header.code(), proto::OK);
  EXPECT_EQ(Values(replies[4].second), (std::vector<float>{-0.5, -0.5, -0.5, -0.5}));
  EXPECT_EQ(handler_->counters().pushes(), 2u);
}

TEST_F(ServerHandlerTest, RetriedPushAppliedAlreadyIsAcknowledgedNotAppliedAgain) {
  SetUpHandler(proto::ASP, 2);
  Push(0, 0, {0, 0, 0, 0}, 0, /*init=*/true);
  Push(0, 0, {1, 1, 1, 1}, /*clock=*/5);
  const std::vector<float> once = *handler_->Weights(0);
  auto retry = [this](int64_t clock) {
    std::vector<float> g = {1, 1, 1, 1};
    Message m = WorkerRequest(proto::PUSH, 0, 0);
    m.header.set_clock(clock);
    m.header.mutable_push()->set_retry(true);
    m.payload.push_back(zmq::message_t(g.data(), g.size() * sizeof(float)));
    Handle(std::move(m), "w0");
  };
  retry(5);
  EXPECT_EQ(*handler_->Weights(0), once);
  EXPECT_EQ(handler_->counters().repeated_pushes(), 1u);
  retry(6);  // never applied: applied now
  EXPECT_NE(*handler_->Weights(0), once);
  Push(0, 0, {1, 1, 1, 1}, /*clock=*/6);  // not a retry: applied, whatever its clock
  for (const auto& [to, reply] : sink_.Take()) EXPECT_EQ(reply.header.code(), proto::OK);
  EXPECT_EQ(handler_->counters().repeated_pushes(), 1u);
  EXPECT_EQ(handler_->counters().pushes(), 5u);
}

// A replacement server restores an older checkpoint while the workers' clocks went on: in ssp
// each worker's next push tells how far it is, or the bounds would wait for pushes that never
// come.
TEST_F(ServerHandlerTest, SspRestoredPartitionTakesEachWorkersClockFromItsNextPush) {
  SetUpHandler(proto::SSP, 2);
  Push(0, 0, {0, 0, 0, 0}, 0, /*init=*/true);
  Push(0, 1, {0, 0, 0, 0}, 0, /*init=*/true);
  const proto::ShardCheckpoint shard = handler_->Snapshot();  // at step 0
  SetUpHandler(proto::SSP, 2);
  ASSERT_TRUE(handler_->Restore(shard).ok());
  sink_.Take();
  Push(0, 0, {1, 1, 1, 1}, /*clock=*/40);
  Push(1, 0, {1, 1, 1, 1}, /*clock=*/38);
  Pull(0, 0, 0, /*min_clock=*/39);  // staleness 2 at clock 41: every worker has pushed 39
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_EQ(replies[2].second.header.type(), proto::PULL);
  EXPECT_EQ(replies[2].second.header.code(), proto::OK);
}


// Workers joining bsp and ssp jobs at a clock boundary (server/worker_roster.h).
class ServerJoinTest : public ServerHandlerTest {
 protected:
  // A MEMBERSHIP from the scheduler; its reply (the pulls it released go to released_).
  Message Membership(const proto::Membership& membership) {
    Message m;
    m.header.set_type(proto::MEMBERSHIP);
    m.header.set_sender_role(proto::SCHEDULER);
    *m.header.mutable_membership() = membership;
    Handle(std::move(m), "scheduler");
    Message reply;
    int replies = 0;
    released_.clear();
    for (auto& [to, r] : sink_.Take()) {
      if (r.header.type() == proto::MEMBERSHIP) {
        reply = std::move(r);
        ++replies;
      } else {
        released_.push_back(std::move(r));
      }
    }
    EXPECT_EQ(replies, 1);
    return reply;
  }
  Message Prepare() {
    proto::Membership m;
    m.set_prepare(true);
    return Membership(m);
  }
  // Grows to `workers` ("w0", "w1", ...) from `join_clock`.
  Message Grow(int workers, int64_t join_clock) {
    proto::Membership m;
    m.set_num_workers(workers);
    for (const std::string& id : testing::WorkerIds(workers)) m.add_worker_ids(id);
    m.set_join_clock(join_clock);
    return Membership(m);
  }
  std::vector<Message> released_;
};

// bsp: the prepare holds the clocks past the one being aggregated, so the join clock it
// answers (that one + 1) stays ahead of every completed clock; before it clocks complete
// without the joiner, from it on they wait for it.
TEST_F(ServerJoinTest, BspJoinerTakesPartFromTheAgreedClock) {
  SetUpHandler(proto::BSP, 2);
  Push(0, 0, {0, 0, 0, 0}, 0, /*init=*/true);
  Push(0, 0, {1, 1, 1, 1}, /*clock=*/0);  // clock 0 is being aggregated
  sink_.Take();
  const Message prepared = Prepare();
  EXPECT_EQ(prepared.header.code(), proto::OK);
  EXPECT_EQ(prepared.header.clock(), 1);
  // Clock 0 may still complete; clock 1 may not, until the join is committed.
  Push(1, 0, {1, 1, 1, 1}, 0);
  Push(0, 0, {1, 1, 1, 1}, 1);
  Push(1, 0, {1, 1, 1, 1}, 1);
  Pull(0, 0, /*min_version=*/2);
  EXPECT_EQ(sink_.Take().size(), 3u);  // the pushes' acks; the pull is parked
  EXPECT_EQ(*handler_->Weights(0), std::vector<float>({-0.5f, -0.5f, -0.5f, -0.5f}));
  // Committed at clock 2: clock 1 completes without worker 2, clock 2 waits for it.
  EXPECT_EQ(Grow(3, 2).header.code(), proto::OK);
  ASSERT_EQ(released_.size(), 1u);
  EXPECT_EQ(released_[0].header.clock(), 2);
  Push(0, 0, {1, 1, 1, 1}, 2);
  Push(1, 0, {1, 1, 1, 1}, 2);
  Pull(2, 0, /*min_version=*/3);
  EXPECT_EQ(sink_.Take().size(), 2u);  // parked: worker 2 has not pushed clock 2
  Push(2, 0, {4, 4, 4, 4}, 2);
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[1].second.header.clock(), 3);
  EXPECT_EQ(Values(replies[1].second), (std::vector<float>{-2, -2, -2, -2}));  // -0.5 * avg 2
}

// A join clock some partition has passed, a prepare outside bsp and ssp, prepare with cancel,
// or a clock out of range: refused, nothing changes; a cancel releases the hold.
TEST_F(ServerJoinTest, BadJoinsAreRefusedAndACancelReleasesTheHold) {
  SetUpHandler(proto::BSP, 1);
  Push(0, 0, {0, 0, 0, 0}, 0, true);
  Push(0, 0, {1, 1, 1, 1}, 0);  // clock 0 completes: partition 0 is at clock 1
  sink_.Take();
  EXPECT_EQ(Grow(2, 0).header.code(), proto::FAILED_PRECONDITION);
  EXPECT_EQ(Grow(2, -1).header.code(), proto::INVALID_ARGUMENT);
  EXPECT_EQ(Grow(2, int64_t{1} << 60).header.code(), proto::INVALID_ARGUMENT);
  proto::Membership both;
  both.set_prepare(true);
  both.set_cancel(true);
  EXPECT_EQ(Membership(both).header.code(), proto::INVALID_ARGUMENT);
  Handle(WorkerRequest(proto::PULL, 1, 0), "w1");  // no worker 1
  EXPECT_EQ(sink_.Take()[0].second.header.code(), proto::INVALID_ARGUMENT);

  EXPECT_EQ(Prepare().header.clock(), 2);
  Push(0, 0, {1, 1, 1, 1}, 1);  // clock 1 completes (the hold is past it)
  Push(0, 0, {1, 1, 1, 1}, 2);  // clock 2 is held
  sink_.Take();
  EXPECT_EQ(*handler_->Weights(0), std::vector<float>({-1, -1, -1, -1}));
  proto::Membership cancel;
  cancel.set_cancel(true);
  EXPECT_EQ(Membership(cancel).header.code(), proto::OK);
  EXPECT_EQ(*handler_->Weights(0), std::vector<float>({-1.5f, -1.5f, -1.5f, -1.5f}));

  SetUpHandler(proto::ASP, 1);
  EXPECT_EQ(Prepare().header.code(), proto::FAILED_PRECONDITION);
}

// A worker that dies while a join is prepared: the clock it held up completes without it, the
// hold still keeps the next one until the join is committed.
TEST_F(ServerJoinTest, ADepartureDuringTheHoldCompletesOnlyTheClocksBeforeIt) {
  SetUpHandler(proto::BSP, 3);
  Push(0, 0, {0, 0, 0, 0}, 0, /*init=*/true);
  Push(0, 0, {1, 1, 1, 1}, 0);
  Push(1, 0, {1, 1, 1, 1}, 0);
  sink_.Take();
  EXPECT_EQ(Prepare().header.clock(), 1);
  handler_->SetDepartedWorkers({2});  // clock 0 no longer waits for worker 2
  Push(0, 0, {1, 1, 1, 1}, 1);
  Push(1, 0, {1, 1, 1, 1}, 1);
  sink_.Take();
  EXPECT_EQ(*handler_->Weights(0), std::vector<float>({-0.5f, -0.5f, -0.5f, -0.5f}));
  EXPECT_EQ(Grow(4, 2).header.code(), proto::OK);  // clock 1 completes without worker 3
  EXPECT_EQ(*handler_->Weights(0), std::vector<float>({-1, -1, -1, -1}));
}

// ssp: the joiner's clock is the most advanced live worker's next one, and it counts as having
// pushed every clock before it, so nobody's staleness bound waits for it.
TEST_F(ServerJoinTest, SspJoinerDoesNotHoldTheOthersBack) {
  SetUpHandler(proto::SSP, 2);
  Push(0, 0, {0, 0, 0, 0}, 0, true);
  for (int64_t c = 0; c < 3; ++c) Push(0, 0, {0, 0, 0, 0}, c);
  Push(1, 0, {0, 0, 0, 0}, 0);
  sink_.Take();
  const Message prepared = Prepare();
  EXPECT_EQ(prepared.header.clock(), 3);  // worker 0 pushes clock 3 next
  EXPECT_EQ(Grow(3, 3).header.code(), proto::OK);
  Pull(1, 0, 0, /*min_clock=*/1);  // every live worker pushed clock 0: ready
  Pull(0, 0, 0, /*min_clock=*/3);  // worker 1 has not pushed clocks 1 and 2: parked
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].first, "w1");
  Push(2, 0, {0, 0, 0, 0}, 3);
  Push(1, 0, {0, 0, 0, 0}, 1);
  Push(1, 0, {0, 0, 0, 0}, 2);
  EXPECT_EQ(sink_.Take().size(), 4u);  // three acks and worker 0's pull
}

}  // namespace
}  // namespace r2sp

namespace r2sp {
namespace {

// server --apply_threads: a handler whose large partition is updated and predicted on several
// threads answers a predicted pull with the same bytes as one that works alone.
TEST(ServerHandlerApplyThreadsTest, SameWeightsAsOneThread) {
  proto::TensorSpec t;
  t.set_name("w");
  t.set_num_elements(200000);
  absl::StatusOr<ModelLayout> layout = ModelLayout::Create({t}, 1 << 20, 1);  // one partition
  ASSERT_TRUE(layout.ok());
  std::vector<std::vector<float>> pulled;
  for (int threads : {1, 3}) {
    ServerOptions options;
    options.sgd = {0.05f, 0.9f, 1e-4f};
    options.sync = proto::R2SP;
    options.apply_threads = threads;
    ServerHandler handler(options);
    handler.Configure(0, ServerPeers{"scheduler", testing::WorkerIds(2)}, *layout);
    RecordingSink sink;
    auto push = [&](std::vector<float> values, bool init) {
      Message m = testing::WorkerRequest(proto::PUSH, 0, 0);
      if (init) m.header.mutable_push()->set_init(true);
      m.header.mutable_push()->set_scale(0.5f);
      m.payload.push_back(zmq::message_t(values.data(), values.size() * sizeof(float)));
      Responder r(&sink, "w0", m.header);
      handler.HandleRequest(std::move(m), std::move(r));
    };
    std::vector<float> values(200000);
    for (size_t i = 0; i < values.size(); ++i) values[i] = 0.001f * static_cast<float>(i % 997);
    push(values, /*init=*/true);
    for (int step = 0; step < 3; ++step) {
      for (size_t i = 0; i < values.size(); ++i) values[i] = std::sin(0.01f * (i + step));
      push(values, /*init=*/false);
    }
    Message m = testing::WorkerRequest(proto::PULL, 0, 0);
    m.header.mutable_pull()->set_predict_fraction(0.5f);
    m.header.mutable_pull()->set_predict_updates(1);
    Responder r(&sink, "w0", m.header);
    handler.HandleRequest(std::move(m), std::move(r));
    std::vector<std::pair<std::string, Message>> replies = sink.Take();
    ASSERT_EQ(replies.size(), 5u);
    const zmq::message_t& frame = replies.back().second.payload.at(0);
    const float* p = static_cast<const float*>(frame.data());
    pulled.emplace_back(p, p + frame.size() / sizeof(float));
  }
  ASSERT_EQ(pulled[0].size(), 200000u);
  EXPECT_EQ(std::memcmp(pulled[0].data(), pulled[1].data(), 200000 * sizeof(float)), 0);
}

// A handler cannot be built from options main would refuse: the constructor checks Validate()
// and names the field. Valid options (the fixture's) build one, as every test above shows.
TEST(ServerHandlerDeathTest, InvalidOptionsAreRefusedAtConstruction) {
  ServerOptions options;
  options.apply_threads = 65;
  EXPECT_DEATH(ServerHandler{options},
               "ServerHandler needs valid options: INVALID_ARGUMENT: --apply_threads "
               "\\(ServerOptions.apply_threads\\) must be auto \\(0\\) or in \\[1, 64\\], "
               "got 65");
  ServerOptions momentum;
  momentum.sgd.momentum = 1.5f;
  EXPECT_DEATH(ServerHandler{momentum},
               "--momentum \\(ServerOptions.sgd.momentum\\) must be in \\[0, 1\\), got 1.5");
}

}  // namespace
}  // namespace r2sp
