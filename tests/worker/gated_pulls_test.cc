// Early pulls behind a gate (worker/gated_pulls.h): PullGate's decisions, exactly, as pushes are
// acknowledged or fail and pulls land; then BucketPusher with a limit against a real
// ServerHandler over the in-process network: the pulls come back into the model before every
// push is done, the rest once Finish pushed it, and Abandon pulls back what was pushed.
#include "worker/gated_pulls.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/worker/one_server.h"
#include "worker/bucket_pusher.h"

namespace r2sp {
namespace {

using Keys = std::vector<uint64_t>;

TEST(PullGateTest, WithoutALimitEachPullGoesAsItsPushIsAcknowledged) {
  PullGate gate(/*pushes=*/3, /*limit=*/0);
  EXPECT_EQ(gate.Pushed(2, true), Keys({2}));
  EXPECT_EQ(gate.Pushed(1, true), Keys({1}));
  EXPECT_EQ(gate.Landed(), Keys());
  EXPECT_EQ(gate.Pushed(0, true), Keys({0}));
}

TEST(PullGateTest, AtTheLimitPullsWaitAndTheLowestKeyGoesFirst) {
  PullGate gate(/*pushes=*/4, /*limit=*/1);
  EXPECT_EQ(gate.Pushed(3, true), Keys({3}));
  EXPECT_EQ(gate.Pushed(2, true), Keys());  // one in flight
  EXPECT_EQ(gate.Pushed(1, true), Keys());
  EXPECT_EQ(gate.Landed(), Keys({1}));  // 3 landed: the lowest waiting key next
  // The last push: everything waiting goes, ascending, however many are in flight.
  EXPECT_EQ(gate.Pushed(0, true), Keys({0, 2}));
  EXPECT_EQ(gate.Landed(), Keys());
}

TEST(PullGateTest, ALimitOfTwoKeepsTwoInFlight) {
  PullGate gate(/*pushes=*/5, /*limit=*/2);
  EXPECT_EQ(gate.Pushed(4, true), Keys({4}));
  EXPECT_EQ(gate.Pushed(3, true), Keys({3}));
  EXPECT_EQ(gate.Pushed(2, true), Keys());
  EXPECT_EQ(gate.Pushed(1, true), Keys());
  EXPECT_EQ(gate.Landed(), Keys({1}));
  EXPECT_EQ(gate.Landed(), Keys({2}));
  EXPECT_EQ(gate.Landed(), Keys());
}

TEST(PullGateTest, AFailedPushIsNotPulledButCountsAsAnswered) {
  PullGate gate(/*pushes=*/3, /*limit=*/1);
  EXPECT_EQ(gate.Pushed(2, true), Keys({2}));
  EXPECT_EQ(gate.Pushed(1, false), Keys());
  EXPECT_EQ(gate.Pushed(0, true), Keys({0}));  // the last answer: all that waits
}

TEST(PullGateTest, EachKeyGoesOnceAndLandingsDoNotGoBelowZero) {
  PullGate gate(/*pushes=*/3, /*limit=*/1);
  EXPECT_EQ(gate.Pushed(2, true), Keys({2}));
  EXPECT_EQ(gate.Pushed(1, true), Keys());
  EXPECT_EQ(gate.Landed(), Keys({1}));
  EXPECT_EQ(gate.Landed(), Keys());
  EXPECT_EQ(gate.Landed(), Keys());  // more landings than pulls released
  EXPECT_EQ(gate.Pushed(0, true), Keys({0}));
}

class GatedBucketPusherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // 10 floats in partitions of 4, 3 and 3 (keys 0, 1, 2 at offsets 0, 4, 7); lr 1.
    job_ = std::make_unique<testing::OneServer>(proto::ASP, /*learning_rate=*/1.0f);
    std::vector<float> zero(10, 0.0f);
    ASSERT_TRUE(job_->ps().Push(zero.data(), 0, /*init=*/true).Wait().ok());
  }

  std::unique_ptr<testing::OneServer> job_;
  std::vector<float> grad_ = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  std::vector<float> params_ = std::vector<float>(10, 99.0f);
};

TEST_F(GatedBucketPusherTest, PullsComeBackBeforeThePushesEndAndTheRestAfterFinish) {
  BucketPusher pusher(&job_->ps(), /*bucket_bytes=*/0, /*pulls_in_flight=*/1);
  pusher.Start(/*clock=*/0, /*scale=*/0, /*gated=*/false, PullAfterPush{params_.data(), {}});
  pusher.Ready(grad_.data(), 7, 3);  // partition 2: pushed, and with nothing in flight, pulled
  ASSERT_TRUE(pusher.pulls()->WaitKeys(2, 2).ok());
  pusher.Ready(grad_.data(), 4, 3);  // partition 1: its pull goes once 2's has landed
  ASSERT_TRUE(pusher.pulls()->WaitKeys(1, 1).ok());
  EXPECT_FALSE(pusher.pulls()->Done());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(params_[i], 99.0f) << i;
  for (int i = 4; i < 10; ++i) EXPECT_EQ(params_[i], -grad_[i]) << i;
  ASSERT_TRUE(pusher.Finish(grad_.data()).ok());
  ASSERT_TRUE(pusher.pulls()->Wait().ok());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(params_[i], -grad_[i]) << i;
  // The next iteration starts a new round of the gate.
  std::vector<float> next(10, 1.0f);
  pusher.Start(1, 0, false, PullAfterPush{params_.data(), {}});
  ASSERT_TRUE(pusher.Finish(next.data()).ok());
  ASSERT_TRUE(pusher.pulls()->Wait().ok());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(params_[i], -grad_[i] - 1.0f) << i;
}

TEST_F(GatedBucketPusherTest, AbandonPullsBackWhatThePushesSent) {
  BucketPusher pusher(&job_->ps(), /*bucket_bytes=*/0, /*pulls_in_flight=*/1);
  pusher.Start(0, 0, false, PullAfterPush{params_.data(), {}});
  pusher.Ready(grad_.data(), 4, 6);  // partitions 1 and 2, pushed together
  pusher.Abandon();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(params_[i], 99.0f) << i;
  for (int i = 4; i < 10; ++i) EXPECT_EQ(params_[i], -grad_[i]) << i;
}

// A server that never answers: every push fails, no partition is pulled, and the pull ends
// Aborted rather than waiting for pulls the gate would never send.
TEST_F(GatedBucketPusherTest, FailedPushesEndThePullAborted) {
  PsClientOptions options;
  options.request_timeout = absl::Milliseconds(100);
  PsClient lost(job_->network().Client("worker0"), &job_->layout(),
                std::vector<std::string>{"nobody"}, options);
  BucketPusher pusher(&lost, /*bucket_bytes=*/0, /*pulls_in_flight=*/1);
  pusher.Start(0, 0, false, PullAfterPush{params_.data(), {}});
  EXPECT_TRUE(absl::IsDeadlineExceeded(pusher.Finish(grad_.data())));
  const absl::Status pulled = pusher.pulls()->Wait();
  EXPECT_TRUE(absl::IsAborted(pulled)) << pulled;
  // The first of the three to time out (their expiry order is the network's).
  const std::string message(pulled.message());
  EXPECT_TRUE(message == "not pulled: the push of key 0 failed" ||
              message == "not pulled: the push of key 1 failed" ||
              message == "not pulled: the push of key 2 failed")
      << message;
  EXPECT_EQ(params_, std::vector<float>(10, 99.0f));
  EXPECT_EQ(lost.counters().pulls, 0u);
}

}  // namespace
}  // namespace r2sp
