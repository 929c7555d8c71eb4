// When r2sp with --overlap asks for its slot (worker/early_slot.h): one smoothed push before
// the compute's predicted end, never before it starts, and never without a prediction; and
// which pushes teach it the push time (against an in-process job's scheduler). The asking in
// a worker's iterations runs in exchanger_test.
#include "worker/early_slot.h"

#include <vector>

#include "gtest/gtest.h"
#include "tests/worker/in_process_job.h"
#include "worker/bucket_pusher.h"

namespace r2sp {
namespace {

TEST(EarlyAskTimeTest, OnePushBeforeThePredictedEndOfCompute) {
  const absl::Time start = absl::FromUnixSeconds(1000);
  EXPECT_EQ(EarlyAskTime(start, 2.0, 0.25), start + absl::Milliseconds(1750));
  EXPECT_EQ(EarlyAskTime(start, 2.0, 0.0), start + absl::Seconds(2));
}

TEST(EarlyAskTimeTest, APushLongerThanTheComputeAsksAtTheStart) {
  const absl::Time start = absl::FromUnixSeconds(1000);
  EXPECT_EQ(EarlyAskTime(start, 0.1, 0.5), start);
  EXPECT_EQ(EarlyAskTime(start, 0.1, -1.0), start + absl::Milliseconds(100));
}

TEST(EarlyAskTimeTest, WithoutAPredictionNeverEarly) {
  const absl::Time start = absl::FromUnixSeconds(1000);
  EXPECT_EQ(EarlyAskTime(start, 0.0, 0.5), absl::InfiniteFuture());
  EXPECT_EQ(EarlyAskTime(start, -1.0, 0.5), absl::InfiniteFuture());
}

// One r2sp worker, one server: each iteration is granted at once; Record gets the push's end
// as the grant plus `push_ms`, and whether the push waited for backward.
class EarlySlotRecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SchedulerOptions job;
    job.num_servers = 1;
    job.num_workers = 1;
    job.sync = proto::R2SP;
    job.heartbeat_timeout = absl::Minutes(5);
    ServerOptions server;
    server.sgd = {/*learning_rate=*/0.1f, /*momentum=*/0.0f, /*weight_decay=*/0.0f};
    proto::TensorSpec w;
    w.set_name("w");
    w.set_num_elements(10);
    job_ = std::make_unique<testing::InProcessJob>(job, server,
                                                   std::vector<proto::TensorSpec>{w});
    ASSERT_TRUE(job_->Start(std::vector<float>(10, 0.0f)).ok());
    worker_ = &job_->workers()[0];
  }

  void Iteration(EarlySlot& slot, BucketPusher& pusher, int clock, double push_ms,
                 bool waited_for_backward) {
    std::vector<float> grad(10, 1.0f);
    pusher.Start(clock, 1.0f, /*gated=*/true);
    slot.Begin(absl::Now(), SlotReport{8, 0.2, 0.0, 10 - clock});
    pusher.Ready(grad.data(), 0, 10);
    absl::Time granted;
    ASSERT_TRUE(slot.Await(SlotReport{8, 0.2, 0.0, 10 - clock}, &granted).ok());
    ASSERT_TRUE(pusher.Finish(grad.data()).ok());
    worker_->scheduler->ReleaseSlot();
    slot.Record(0.2, granted + absl::Microseconds(static_cast<int64_t>(push_ms * 1000)),
                waited_for_backward);
  }

  std::unique_ptr<testing::InProcessJob> job_;
  testing::JobWorker* worker_ = nullptr;
};

TEST_F(EarlySlotRecordTest, APushThatDidNotWaitForBackwardTeachesThePushTime) {
  BucketPusher pusher(worker_->ps.get(), 0);
  EarlySlot slot(worker_->scheduler.get(), &pusher);
  EXPECT_EQ(slot.predicted_push_seconds(), 0.0);
  Iteration(slot, pusher, 0, 20, /*waited_for_backward=*/false);
  EXPECT_NEAR(slot.predicted_push_seconds(), 0.020, 1e-9);
  Iteration(slot, pusher, 1, 90, /*waited_for_backward=*/true);  // the wait is not the push's
  EXPECT_NEAR(slot.predicted_push_seconds(), 0.020, 1e-9);
  Iteration(slot, pusher, 2, 40, /*waited_for_backward=*/false);  // smoothed: half the newest
  EXPECT_NEAR(slot.predicted_push_seconds(), 0.030, 1e-9);
}

}  // namespace
}  // namespace r2sp
