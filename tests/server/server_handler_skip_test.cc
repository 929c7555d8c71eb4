// Skip pushes (proto PushInfo.skip: a worker's step with an inf or NaN gradient, as a
// GradScaler skips it): in bsp the clock averages the other workers' gradients (weighted ones
// renormalised), and a clock every worker skipped moves nothing, its version still advancing
// and a script's Adam not counting it; asynchronous modes acknowledge and apply nothing; a skip
// with values, or in eawild, is refused with the state untouched. AVERAGE runs (each worker's
// own optimizer) hold the clock's average, NaN after a clock every worker skipped, bsp only.
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/sync_modes.h"
#include "gtest/gtest.h"
#include "server/server_handler.h"
#include "tests/testing/fakes.h"

namespace r2sp {
namespace {

using testing::RecordingSink;
using testing::WorkerRequest;

constexpr size_t kN = 4;
const std::vector<float> kInit = {1, -2, 0.5f, 3};

class ServerHandlerSkipTest : public ::testing::Test {
 protected:
  ServerHandlerSkipTest() {
    proto::TensorSpec t;
    t.set_name("w");
    t.set_num_elements(kN);
    layout_ = std::make_unique<ModelLayout>(*ModelLayout::Create({t}, kN * sizeof(float), 1));
  }

  std::unique_ptr<ServerHandler> MakeHandler(proto::SyncMode sync, int workers) {
    ServerOptions options;
    options.sgd = {0.5f, 0.0f, 0.0f};
    options.sync = sync;
    auto handler = std::make_unique<ServerHandler>(options);
    handler->Configure(0, ServerPeers{"scheduler", std::vector<std::string>(workers, "w")},
                       *layout_);
    Message init = Request(0, 0);
    init.header.mutable_push()->set_init(true);
    init.payload.emplace_back(kInit.data(), kN * sizeof(float));
    EXPECT_TRUE(Send(*handler, std::move(init)).ok());
    return handler;
  }

  static Message Request(int rank, int64_t clock, float weight = 0.0f) {
    Message m = WorkerRequest(proto::PUSH, rank, 0);
    m.header.set_clock(clock);
    if (weight > 0.0f) m.header.mutable_push()->set_scale(weight);
    return m;
  }

  absl::Status Push(ServerHandler& handler, int rank, int64_t clock, const std::vector<float>& g,
                    float weight = 0.0f, const proto::PartitionOptimizer* runs = nullptr) {
    Message m = Request(rank, clock, weight);
    if (runs != nullptr) *m.header.mutable_push()->mutable_optimizer() = *runs;
    m.payload.emplace_back(g.data(), g.size() * sizeof(float));
    return Send(handler, std::move(m));
  }

  absl::Status Skip(ServerHandler& handler, int rank, int64_t clock, float weight = 0.0f) {
    Message m = Request(rank, clock, weight);
    m.header.mutable_push()->set_skip(true);
    return Send(handler, std::move(m));
  }

  absl::Status Send(ServerHandler& handler, Message m) {
    return testing::HandleForStatus(handler, sink_, std::move(m));
  }

  static int64_t Version(const ServerHandler& handler) {
    return handler.Snapshot().partitions(0).version();
  }

  RecordingSink sink_;
  std::unique_ptr<ModelLayout> layout_;
};

TEST_F(ServerHandlerSkipTest, BspAveragesTheGradientsThatCame) {
  auto handler = MakeHandler(proto::BSP, 3);
  ASSERT_TRUE(Push(*handler, 0, 0, {2, 2, 2, 2}).ok());
  ASSERT_TRUE(Skip(*handler, 1, 0).ok());
  ASSERT_TRUE(Push(*handler, 2, 0, {4, 0, -2, 2}).ok());
  // The average of the two gradients, {3, 1, 0, 2}, at lr 0.5.
  EXPECT_EQ(*handler->Weights(0), (std::vector<float>{-0.5f, -2.5f, 0.5f, 2}));
  EXPECT_EQ(Version(*handler), 1);
}

TEST_F(ServerHandlerSkipTest, BspWeightedGradientsAreRenormalisedOverTheOnesThatCame) {
  auto handler = MakeHandler(proto::BSP, 2);
  ASSERT_TRUE(Skip(*handler, 0, 0, 0.25f).ok());
  ASSERT_TRUE(Push(*handler, 1, 0, {4, 4, -4, 8}, 0.75f).ok());
  // 0.75 g / (1 - 0.25) = g, at lr 0.5.
  EXPECT_EQ(*handler->Weights(0), (std::vector<float>{-1, -4, 2.5f, -1}));
}

TEST_F(ServerHandlerSkipTest, AClockEveryWorkerSkippedMovesNothingAndAdamDoesNotCountIt) {
  auto handler = MakeHandler(proto::BSP, 2);
  ASSERT_TRUE(Skip(*handler, 0, 0).ok());
  ASSERT_TRUE(Skip(*handler, 1, 0).ok());
  EXPECT_EQ(*handler->Weights(0), kInit);
  const proto::PartitionCheckpoint skipped = handler->Snapshot().partitions(0);
  EXPECT_EQ(skipped.version(), 1);  // the clock's pulls are answered
  EXPECT_EQ(skipped.updates(), 0);
  EXPECT_EQ(skipped.steps(), 1.0);
  // The next clock is Adam's first update: each weight moves by lr against its gradient's sign.
  proto::PartitionOptimizer runs;
  proto::OptimizerRun* run = runs.add_runs();
  run->set_end(kN);
  run->mutable_settings()->set_kind(proto::OPTIMIZER_ADAM);
  run->mutable_settings()->set_lr(0.125);
  run->mutable_settings()->set_beta1(0.9);
  run->mutable_settings()->set_beta2(0.999);
  run->mutable_settings()->set_eps(1e-8);
  ASSERT_TRUE(Push(*handler, 0, 1, {1, -1, 2, -2}, 0.0f, &runs).ok());
  ASSERT_TRUE(Push(*handler, 1, 1, {1, -1, 2, -2}, 0.0f, &runs).ok());
  const std::vector<float> w = *handler->Weights(0);
  EXPECT_FLOAT_EQ(w[0], 0.875f);
  EXPECT_FLOAT_EQ(w[1], -1.875f);
  EXPECT_FLOAT_EQ(w[2], 0.375f);
  EXPECT_FLOAT_EQ(w[3], 3.125f);
  EXPECT_EQ(handler->Snapshot().partitions(0).updates(), 1);

  // A restored server keeps the count: its next update is Adam's second.
  auto restored = MakeHandler(proto::BSP, 2);
  ASSERT_TRUE(restored->Restore(handler->Snapshot()).ok());
  EXPECT_EQ(restored->Snapshot().partitions(0).updates(), 1);
  EXPECT_EQ(restored->Snapshot().partitions(0).version(), 2);
}

// Runs of the partition's kN values: [0, split) with `first`, [split, kN) AVERAGE.
proto::PartitionOptimizer AverageRuns(size_t split, proto::OptimizerKind first) {
  proto::PartitionOptimizer runs;
  if (split > 0) {
    proto::OptimizerRun* run = runs.add_runs();
    run->set_end(split);
    run->mutable_settings()->set_kind(first);
    run->mutable_settings()->set_lr(0.5);
  }
  proto::OptimizerRun* average = runs.add_runs();
  average->set_end(kN);
  average->mutable_settings()->set_kind(proto::OPTIMIZER_AVERAGE);
  return runs;
}

TEST_F(ServerHandlerSkipTest, AverageRunsHoldTheClocksAverageAndNaNWhenEveryWorkerSkipped) {
  auto handler = MakeHandler(proto::BSP, 3);
  const proto::PartitionOptimizer runs = AverageRuns(1, proto::OPTIMIZER_SGD);
  ASSERT_TRUE(Push(*handler, 0, 0, {2, 2, 2, 2}, 0.0f, &runs).ok());
  ASSERT_TRUE(Skip(*handler, 1, 0).ok());
  ASSERT_TRUE(Push(*handler, 2, 0, {4, 0, -2, 3}, 0.0f, &runs).ok());
  // Element 0 takes SGD at lr 0.5 on the average 3; the AVERAGE run holds {1, 0, 2.5}.
  EXPECT_EQ(*handler->Weights(0), (std::vector<float>{-0.5f, 1, 0, 2.5f}));
  for (int w = 0; w < 3; ++w) ASSERT_TRUE(Skip(*handler, w, 1).ok());
  const std::vector<float> skipped = *handler->Weights(0);
  EXPECT_EQ(skipped[0], -0.5f);  // the SGD run stands still
  for (size_t i = 1; i < kN; ++i) EXPECT_TRUE(std::isnan(skipped[i])) << i;
  EXPECT_EQ(handler->Snapshot().partitions(0).version(), 2);
  EXPECT_EQ(handler->Snapshot().partitions(0).updates(), 1);
  ASSERT_TRUE(Push(*handler, 0, 2, {1, 1, 1, 1}, 0.0f, &runs).ok());
  ASSERT_TRUE(Push(*handler, 1, 2, {3, 3, 3, 3}, 0.0f, &runs).ok());
  ASSERT_TRUE(Push(*handler, 2, 2, {5, 5, 5, 5}, 0.0f, &runs).ok());
  EXPECT_EQ(*handler->Weights(0), (std::vector<float>{-2.0f, 3, 3, 3}));
}

TEST_F(ServerHandlerSkipTest, AverageRunsAreRefusedOutsideBspAndChangeNothing) {
  for (proto::SyncMode sync : {proto::ASP, proto::SSP, proto::R2SP}) {
    auto handler = MakeHandler(sync, 2);
    const proto::PartitionOptimizer runs = AverageRuns(0, proto::OPTIMIZER_SGD);
    EXPECT_EQ(Push(*handler, 0, 0, {2, 2, 2, 2}, 0.0f, &runs),
              absl::InvalidArgumentError(absl::StrCat(
                  "optimizer settings: AVERAGE (each worker applies its own optimizer to the "
                  "clock's averaged gradient) needs bsp; this job's mode is ",
                  SyncModeName(sync))));
    EXPECT_EQ(*handler->Weights(0), kInit);
  }
}

TEST_F(ServerHandlerSkipTest, AsynchronousSkipsApplyNothing) {
  auto handler = MakeHandler(proto::ASP, 2);
  ASSERT_TRUE(Skip(*handler, 0, 0).ok());
  EXPECT_EQ(*handler->Weights(0), kInit);
  EXPECT_EQ(Version(*handler), 0);
  ASSERT_TRUE(Push(*handler, 1, 0, {2, 0, 0, 0}).ok());
  EXPECT_EQ(*handler->Weights(0), (std::vector<float>{0, -2, 0.5f, 3}));
}

TEST_F(ServerHandlerSkipTest, MalformedSkipsAreRefusedAndChangeNothing) {
  auto handler = MakeHandler(proto::BSP, 2);
  Message with_values = Request(0, 0);
  with_values.header.mutable_push()->set_skip(true);
  with_values.payload.emplace_back(kInit.data(), kN * sizeof(float));
  EXPECT_EQ(Send(*handler, std::move(with_values)),
            absl::InvalidArgumentError(
                "a skip push of partition 0 carries no values and is not an init"));
  EXPECT_EQ(Skip(*handler, 0, 0, 1.5f),
            absl::InvalidArgumentError("push scale must be in [0, 1], got 1.5"));
  ASSERT_TRUE(Push(*handler, 1, 0, {2, 2, 2, 2}).ok());
  ASSERT_TRUE(Push(*handler, 0, 0, {2, 2, 2, 2}).ok());  // worker 0's clock 0 still open
  EXPECT_EQ(*handler->Weights(0), (std::vector<float>{0, -3, -0.5f, 2}));

  auto eawild = MakeHandler(proto::EAWILD, 2);
  EXPECT_EQ(Skip(*eawild, 0, 0),
            absl::InvalidArgumentError("easgd and eawild push differences, not gradients: "
                                       "there is no step to skip"));
  EXPECT_EQ(*eawild->Weights(0), kInit);
}

}  // namespace
}  // namespace r2sp
