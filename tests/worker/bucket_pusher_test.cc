// Lazy bucketing (worker/bucket_pusher.h) against a real ServerHandler over the in-process
// network: a partition goes out once every value of it was reported ready, complete partitions
// wait until the bucket holds the threshold, ranges may cut across partitions, Finish pushes
// whatever backward did not report, and the server ends up where a whole-model push leaves it
// (from fp32 gradients, or fp16 ones a device encoded).
#include "worker/bucket_pusher.h"

#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "common/codec/fp16.h"
#include "gtest/gtest.h"
#include "tests/worker/one_server.h"

namespace r2sp {
namespace {

class BucketPusherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // 10 floats in partitions of 4, 3 and 3 (offsets 0, 4, 7) on one server; lr 1.
    job_ = std::make_unique<testing::OneServer>(proto::ASP, /*learning_rate=*/1.0f);
    server_ = &job_->server();
    ps_ = &job_->ps();
    std::vector<float> zero(10, 0.0f);
    ASSERT_TRUE(ps_->Push(zero.data(), 0, /*init=*/true).Wait().ok());
  }

  // Waits until the server has seen `pushes` pushes (initial values included), or 5 s.
  uint64_t ServerPushesAfterWaiting(uint64_t pushes) {
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (server_->counters().pushes() < pushes && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    absl::SleepFor(absl::Milliseconds(20));  // and nothing more arrives
    return server_->counters().pushes();
  }

  std::vector<float> Weights() const { return job_->Weights(); }

  std::unique_ptr<testing::OneServer> job_;
  ServerHandler* server_ = nullptr;
  PsClient* ps_ = nullptr;
};

TEST_F(BucketPusherTest, PartitionsGoOutAsTheyCompleteAndFinishSendsTheRest) {
  BucketPusher pusher(ps_, /*bucket_bytes=*/0);
  std::vector<float> grad = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  pusher.Start(/*clock=*/0, /*scale=*/0);
  pusher.Ready(grad.data(), 8, 2);  // the last partition is 7..9: not complete yet
  EXPECT_EQ(ServerPushesAfterWaiting(3), 3u);  // 3 initial values only
  pusher.Ready(grad.data(), 5, 3);  // completes 7..9; 4..6 still lacks 4
  EXPECT_EQ(ServerPushesAfterWaiting(4), 4u);
  pusher.Ready(grad.data(), 3, 2);  // completes 4..6 (and part of 0..3)
  EXPECT_EQ(ServerPushesAfterWaiting(5), 5u);
  EXPECT_EQ(pusher.early_partitions(), 2);
  ASSERT_TRUE(pusher.Finish(grad.data()).ok());  // 0..3, never completely reported
  EXPECT_EQ(server_->counters().pushes(), 6u);
  const std::vector<float> w = Weights();
  for (int i = 0; i < 10; ++i) EXPECT_EQ(w[i], -grad[i]) << i;
}

// With a pull (early pulls): each partition is pulled into the model once its push is
// acknowledged, into one whole-model pull that is done once Finish sent the rest.
TEST_F(BucketPusherTest, EachPartitionIsPulledOnceItsPushIsAcknowledged) {
  BucketPusher pusher(ps_, /*bucket_bytes=*/0);
  std::vector<float> grad = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  std::vector<float> params(10, 99.0f);
  pusher.Start(/*clock=*/0, /*scale=*/0, /*gated=*/false, PullAfterPush{params.data(), {}});
  ASSERT_TRUE(pusher.pulls().has_value());
  pusher.Ready(grad.data(), 7, 3);  // partition 2 (7..9) complete: pushed, then pulled
  ASSERT_TRUE(pusher.pulls()->WaitKeys(2, 2).ok());
  EXPECT_FALSE(pusher.pulls()->Done());
  for (int i = 0; i < 7; ++i) EXPECT_EQ(params[i], 99.0f) << i;
  for (int i = 7; i < 10; ++i) EXPECT_EQ(params[i], -grad[i]) << i;
  ASSERT_TRUE(pusher.Finish(grad.data()).ok());
  ASSERT_TRUE(pusher.pulls()->Wait().ok());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(params[i], -grad[i]) << i;
}

// An iteration an error cut short: Abandon waits for what was pushed and its pull, and pushes
// nothing more.
TEST_F(BucketPusherTest, AbandonWaitsForThePushesSentAndTheirPulls) {
  BucketPusher pusher(ps_, /*bucket_bytes=*/0);
  std::vector<float> grad = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  std::vector<float> params(10, 99.0f);
  pusher.Start(0, 0, false, PullAfterPush{params.data(), {}});
  pusher.Ready(grad.data(), 4, 6);  // partitions 1 and 2
  pusher.Abandon();
  EXPECT_FALSE(pusher.started());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(params[i], 99.0f) << i;
  for (int i = 4; i < 10; ++i) EXPECT_EQ(params[i], -grad[i]) << i;
  EXPECT_EQ(ServerPushesAfterWaiting(5), 5u);  // 3 initial values and 2 pushes, no more
}

// Gradients a device encoded to fp16 (HostGradient::Fp16): each partition goes from its own
// offset of the binary16 array, and the server ends where the fp32 values leave it.
TEST(BucketPusherFp16Test, GradientsEncodedOnTheDeviceGoFromTheirOwnOffsets) {
  codec::CodecSpec fp16;
  fp16.codec = proto::FP16;
  testing::OneServer job(proto::ASP, /*learning_rate=*/1.0f, fp16);
  std::vector<float> zero(10, 0.0f), grad = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};  // exact in fp16
  ASSERT_TRUE(job.ps().Push(zero.data(), 0, /*init=*/true).Wait().ok());
  std::vector<uint16_t> half(10);
  codec::EncodeFp16(grad.data(), grad.size(), half.data());
  BucketPusher pusher(&job.ps(), /*bucket_bytes=*/0);
  pusher.Start(0, 0);
  pusher.Ready(HostGradient::Fp16(half.data()), 4, 6);  // 4..6 and 7..9 go now
  ASSERT_TRUE(pusher.Finish(HostGradient::Fp16(half.data())).ok());  // and 0..3
  EXPECT_EQ(pusher.early_partitions(), 2);
  const std::vector<float> w = job.Weights();
  for (int i = 0; i < 10; ++i) EXPECT_EQ(w[i], -grad[i]) << i;
  EXPECT_EQ(job.ps().counters().bytes_pushed, 10 * sizeof(float) + 10 * sizeof(uint16_t));
}

TEST_F(BucketPusherTest, CompletePartitionsWaitForTheBucketThreshold) {
  BucketPusher pusher(ps_, /*bucket_bytes=*/24);  // two 3-float partitions
  std::vector<float> grad(10, 1.0f);
  pusher.Start(0, 0);
  pusher.Ready(grad.data(), 7, 3);
  EXPECT_EQ(ServerPushesAfterWaiting(3), 3u);  // 12 bytes waiting
  pusher.Ready(grad.data(), 0, 7);             // everything else: 40 bytes, all three go
  EXPECT_EQ(ServerPushesAfterWaiting(6), 6u);
  EXPECT_EQ(pusher.early_partitions(), 3);
  ASSERT_TRUE(pusher.Finish(grad.data()).ok());
  EXPECT_EQ(server_->counters().pushes(), 6u);  // nothing twice
  for (float v : Weights()) EXPECT_EQ(v, -1.0f);
}

TEST_F(BucketPusherTest, WithoutReportsFinishPushesTheWholeGradient) {
  BucketPusher pusher(ps_, 0);
  std::vector<float> grad(10, 2.0f);
  pusher.Start(0, 0);
  ASSERT_TRUE(pusher.Finish(grad.data()).ok());
  EXPECT_EQ(pusher.early_partitions(), 0);
  for (float v : Weights()) EXPECT_EQ(v, -2.0f);
  // The next iteration starts afresh.
  pusher.Start(1, 0);
  pusher.Ready(grad.data(), 0, 10);
  EXPECT_EQ(pusher.early_partitions(), 3);
  ASSERT_TRUE(pusher.Finish(grad.data()).ok());
  for (float v : Weights()) EXPECT_EQ(v, -4.0f);
}

// r2sp's slot gates the push: complete partitions wait for Open whatever the threshold, go out
// together when it comes, and later ones as usual; only partitions out before backward ended
// count as early.
TEST_F(BucketPusherTest, AGatedIterationHoldsCompletePartitionsUntilOpen) {
  BucketPusher pusher(ps_, /*bucket_bytes=*/0);
  std::vector<float> grad(10, 1.0f);
  pusher.Start(0, 0, /*gated=*/true);
  pusher.Ready(grad.data(), 7, 3);  // 7..9 complete, held
  EXPECT_EQ(ServerPushesAfterWaiting(4), 3u);
  pusher.Open();
  EXPECT_EQ(ServerPushesAfterWaiting(4), 4u);
  pusher.Ready(grad.data(), 4, 3);  // 4..6: out at once now
  EXPECT_EQ(ServerPushesAfterWaiting(5), 5u);
  pusher.Open();  // open already: nothing happens
  pusher.BackwardEnded();
  ASSERT_TRUE(pusher.Finish(grad.data()).ok());  // 0..3
  EXPECT_EQ(server_->counters().pushes(), 6u);
  EXPECT_EQ(pusher.early_partitions(), 2);
  for (float v : Weights()) EXPECT_EQ(v, -1.0f);
}

TEST_F(BucketPusherTest, AGateOpenedAfterBackwardPushesButNothingCountsAsEarly) {
  BucketPusher pusher(ps_, 0);
  std::vector<float> grad(10, 1.0f);
  pusher.Start(0, 0, /*gated=*/true);
  pusher.Ready(grad.data(), 0, 10);
  pusher.BackwardEnded();
  EXPECT_EQ(ServerPushesAfterWaiting(4), 3u);
  pusher.Open();  // the grant came while the worker waited for it after compute
  EXPECT_EQ(ServerPushesAfterWaiting(6), 6u);
  ASSERT_TRUE(pusher.Finish(grad.data()).ok());
  EXPECT_EQ(server_->counters().pushes(), 6u);
  EXPECT_EQ(pusher.early_partitions(), 0);
  for (float v : Weights()) EXPECT_EQ(v, -1.0f);
}

// Whether the grant found the gradient complete (worker/early_slot.h learns the push time from
// such pushes only): every partition reported before Open, or some still to come.
TEST_F(BucketPusherTest, AGateOpenedOnACompleteGradientSaysSo) {
  BucketPusher pusher(ps_, 0);
  std::vector<float> grad(10, 1.0f);
  pusher.Start(0, 0, /*gated=*/true);
  pusher.Ready(grad.data(), 0, 10);
  EXPECT_FALSE(pusher.complete_when_opened());  // not opened yet
  pusher.Open();  // a paced step: backward done, compute goes on
  EXPECT_TRUE(pusher.complete_when_opened());
  pusher.BackwardEnded();
  ASSERT_TRUE(pusher.Finish(grad.data()).ok());
  EXPECT_TRUE(pusher.complete_when_opened());  // until the next Start
  EXPECT_EQ(pusher.early_partitions(), 3);

  pusher.Start(1, 0, /*gated=*/true);
  EXPECT_FALSE(pusher.complete_when_opened());
  pusher.Ready(grad.data(), 4, 6);  // 4..9; 0..3 still to come
  pusher.Open();
  pusher.Ready(grad.data(), 0, 4);
  EXPECT_FALSE(pusher.complete_when_opened());
  pusher.BackwardEnded();
  ASSERT_TRUE(pusher.Finish(grad.data()).ok());
  EXPECT_FALSE(pusher.complete_when_opened());

  pusher.Start(2, 0, /*gated=*/false);  // not gated: no grant to open it
  pusher.Ready(grad.data(), 0, 10);
  pusher.Open();
  ASSERT_TRUE(pusher.Finish(grad.data()).ok());
  EXPECT_FALSE(pusher.complete_when_opened());
  for (float v : Weights()) EXPECT_EQ(v, -3.0f);
}

}  // namespace
}  // namespace r2sp
