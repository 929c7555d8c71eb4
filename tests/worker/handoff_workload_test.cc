// HandoffWorkload between two threads: the loop's side (ComputeGradient, EvaluateTest, the
// node's Joined/AwaitStart/Finish/Fail) on a thread of the test's, the script's side (Wait,
// Start, GradientReady, Submit, ReportEvaluation, Close, and the overlapped pulls' opt-in and
// RequestParams/AwaitParams) on the test's main thread.
#include "worker/handoff_workload.h"

#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace r2sp {
namespace {

using State = HandoffWorkload::State;

constexpr absl::Duration kLong = absl::Seconds(10);

class HandoffWorkloadTest : public ::testing::Test {
 protected:
  HandoffWorkloadTest() : grads_(8, 0.0f), grads16_(8, 0), handoff_(grads_.data(), grads16_.data()) {}
  ~HandoffWorkloadTest() override {
    if (loop_.joinable()) loop_.join();
  }

  // Joined and started over `samples`, with epochs of `steps` steps on `world` shards.
  void StartTraining(int64_t samples, int64_t steps, int world, bool evaluates) {
    JoinedJob job;
    job.rank = 1;
    job.workers = 2;
    job.mode = "bsp";
    job.batch_size = 4;
    job.evaluates = [evaluates] { return evaluates; };
    handoff_.Joined(job);
    ASSERT_EQ(*handoff_.Wait(kLong), State::kJoined);
    EXPECT_EQ(handoff_.joined().rank, 1);
    ASSERT_TRUE(handoff_.Start(samples).ok());
    EXPECT_EQ(*handoff_.AwaitStart(), samples);
    handoff_.SetTraining(world);
    steps_ = steps;
  }

  std::vector<float> grads_;
  std::vector<uint16_t> grads16_;
  HandoffWorkload handoff_;
  std::thread loop_;
  int64_t steps_ = 0;  // each epoch's, as the loop gives them to StartEpoch
};

TEST_F(HandoffWorkloadTest, AStepGoesToTheScriptAndItsGradientComesBack) {
  StartTraining(64, 4, 2, false);
  std::vector<std::pair<int64_t, int64_t>> ready;
  handoff_.set_gradient_ready([&](HostGradient g, int64_t offset, int64_t count) {
    EXPECT_EQ(g.fp32, grads_.data());
    ready.emplace_back(offset, count);
  });
  absl::StatusOr<ComputedStep> computed;
  handoff_.StartEpoch(1, steps_);
  loop_ = std::thread([&] { computed = handoff_.ComputeGradient(7, 5, nullptr); });
  ASSERT_EQ(*handoff_.Wait(kLong), State::kStepWanted);
  const WantedStep step = handoff_.step();
  EXPECT_EQ(step.clock, 7);
  EXPECT_EQ(step.epoch, 1);
  EXPECT_EQ(step.index, 0);
  EXPECT_EQ(step.epoch_steps, 4);
  EXPECT_EQ(step.batch, 5);
  EXPECT_EQ(step.live_shards, (std::vector<int>{0, 1}));
  ASSERT_TRUE(handoff_.GradientReady(4, 4, false, 8).ok());
  ASSERT_TRUE(handoff_.GradientReady(0, 4, false, 8).ok());
  ASSERT_TRUE(handoff_.Submit(5, 0.75, false).ok());
  loop_.join();
  ASSERT_TRUE(computed.ok());
  EXPECT_EQ(computed->samples, 5);
  EXPECT_EQ(computed->loss, 0.75);
  EXPECT_EQ(computed->grads.fp32, grads_.data());
  EXPECT_EQ(ready, (std::vector<std::pair<int64_t, int64_t>>{{4, 4}, {0, 4}}));
  EXPECT_EQ(*handoff_.Wait(absl::ZeroDuration()), State::kRunning);
}

TEST_F(HandoffWorkloadTest, Fp16GradientsComeBackAsBinary16) {
  StartTraining(64, 4, 2, false);
  absl::StatusOr<ComputedStep> computed;
  handoff_.StartEpoch(0, steps_);
  loop_ = std::thread([&] { computed = handoff_.ComputeGradient(0, 4, nullptr); });
  ASSERT_EQ(*handoff_.Wait(kLong), State::kStepWanted);
  ASSERT_TRUE(handoff_.Submit(4, 1.0, true).ok());
  loop_.join();
  EXPECT_EQ(computed->grads.fp16, grads16_.data());
  EXPECT_EQ(computed->grads.fp32, nullptr);
}

TEST_F(HandoffWorkloadTest, AnEpochPlanGivesItsStepsAndShards) {
  StartTraining(64, 4, 3, false);
  handoff_.SetEpochPlan(2, {0, 2});
  handoff_.StartEpoch(2, 6);
  handoff_.SkipSteps(3, 4);  // a resumed run
  loop_ = std::thread([&] { (void)handoff_.ComputeGradient(11, 4, nullptr); });
  ASSERT_EQ(*handoff_.Wait(kLong), State::kStepWanted);
  EXPECT_EQ(handoff_.step().index, 3);
  EXPECT_EQ(handoff_.step().epoch_steps, 6);
  EXPECT_EQ(handoff_.step().live_shards, (std::vector<int>{0, 2}));
  ASSERT_TRUE(handoff_.Submit(4, 1.0, false).ok());
}

TEST_F(HandoffWorkloadTest, TheRunsLastEpochEndsWhereTheLoopSays) {
  JoinedJob job;
  handoff_.Joined(job);
  ASSERT_TRUE(handoff_.Start(64).ok());
  handoff_.SetTraining(2);
  handoff_.StartEpoch(1, 3);  // --max_steps ends the run after epoch 1's 3rd step
  handoff_.SkipSteps(1, 4);
  loop_ = std::thread([&] { (void)handoff_.ComputeGradient(9, 4, nullptr); });
  ASSERT_EQ(*handoff_.Wait(kLong), State::kStepWanted);
  EXPECT_EQ(handoff_.step().index, 1);
  EXPECT_EQ(handoff_.step().epoch_steps, 3);
  ASSERT_TRUE(handoff_.Submit(4, 1.0, false).ok());
}

TEST_F(HandoffWorkloadTest, TheEvaluationIsReportedOrSkipped) {
  StartTraining(64, 4, 2, true);
  EXPECT_TRUE(handoff_.EvaluatesAfterEpoch());
  EXPECT_FALSE(handoff_.ReportEvaluation({0.5, 0.1}));  // none wanted
  absl::StatusOr<std::optional<TestEvaluation>> first, second;
  loop_ = std::thread([&] {
    first = handoff_.EvaluateTest(nullptr);
    second = handoff_.EvaluateTest(nullptr);
  });
  ASSERT_EQ(*handoff_.Wait(kLong), State::kEvaluationWanted);
  EXPECT_TRUE(handoff_.ReportEvaluation({0.875, 0.25}));
  // Wait until the loop asks again (its state goes back to kEvaluationWanted).
  while (*handoff_.Wait(kLong) != State::kEvaluationWanted) {}
  handoff_.SkipEvaluation();
  loop_.join();
  ASSERT_TRUE(first.ok() && first->has_value());
  EXPECT_EQ((*first)->accuracy, 0.875);
  EXPECT_EQ((*first)->loss, 0.25);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->has_value());
}

TEST_F(HandoffWorkloadTest, CloseEndsTheLoopsWaitWithItsStatus) {
  StartTraining(64, 4, 2, false);
  absl::StatusOr<ComputedStep> computed;
  loop_ = std::thread([&] { computed = handoff_.ComputeGradient(0, 4, nullptr); });
  ASSERT_EQ(*handoff_.Wait(kLong), State::kStepWanted);
  handoff_.Close(absl::CancelledError("interrupted"));
  loop_.join();
  EXPECT_EQ(computed.status(), absl::CancelledError("interrupted"));
  EXPECT_EQ(handoff_.Wait(absl::ZeroDuration()).status(), absl::CancelledError("interrupted"));
  EXPECT_EQ(handoff_.Submit(4, 1.0, false), absl::CancelledError("interrupted"));
}

TEST_F(HandoffWorkloadTest, CloseBeforeTheStartEndsAwaitStart) {
  handoff_.Close(absl::CancelledError("the worker was destroyed"));
  EXPECT_EQ(handoff_.AwaitStart().status(), absl::CancelledError("the worker was destroyed"));
}

TEST_F(HandoffWorkloadTest, AFailedRunIsWhatTheScriptSees) {
  handoff_.Fail(absl::AbortedError("declared dead by the scheduler"));
  EXPECT_EQ(handoff_.Wait(kLong).status(), absl::AbortedError("declared dead by the scheduler"));
}

TEST_F(HandoffWorkloadTest, FinishSaysTheRunIsOverWithItsResult) {
  StartTraining(64, 4, 2, false);
  LoopResult result;
  result.steps = 8;
  result.test_accuracy = 0.5;
  handoff_.Finish(result);
  ASSERT_EQ(*handoff_.Wait(kLong), State::kOver);
  EXPECT_EQ(handoff_.result().steps, 8);
  EXPECT_EQ(handoff_.result().test_accuracy, 0.5);
  const absl::Status more = handoff_.Submit(4, 1.0, false);
  EXPECT_EQ(more.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(more.message(), "the job's training is over: the script ran more steps than the job "
                            "planned (iterate r2sp.torch.DistributedSampler)");
}

// The node's final pull waits for the script's finish() (AllowFinal), or for Close: until then
// the script may still read the parameters training left (a pull writing them at the same time
// gave it the final centre instead of its own copy, now and then, in elastic_job_test).
TEST_F(HandoffWorkloadTest, TheFinalPullWaitsForTheScriptsFinishOrClose) {
  StartTraining(64, 4, 2, false);
  handoff_.Finish(LoopResult());
  EXPECT_FALSE(handoff_.AwaitFinal(absl::Milliseconds(20)));
  std::thread script([this] {
    absl::SleepFor(absl::Milliseconds(50));
    handoff_.AllowFinal();
  });
  EXPECT_TRUE(handoff_.AwaitFinal(kLong));
  script.join();
  HandoffWorkload closed(nullptr, nullptr);
  EXPECT_FALSE(closed.AwaitFinal(absl::Milliseconds(20)));
  closed.Close(absl::CancelledError("interrupted"));
  EXPECT_TRUE(closed.AwaitFinal(absl::ZeroDuration()));
}

TEST_F(HandoffWorkloadTest, CallsOutOfTurnAreRefused) {
  EXPECT_EQ(handoff_.Start(10), absl::FailedPreconditionError(
                                    "training starts after the worker joined the job"));
  handoff_.Joined(JoinedJob{});
  EXPECT_EQ(handoff_.Start(0), absl::InvalidArgumentError(
                                   "the training set must hold at least one sample, got 0"));
  EXPECT_EQ(handoff_.GradientReady(0, 4, false, 8),
            absl::FailedPreconditionError(
                "a gradient is ready only during a step the job asked for (after next_step)"));
  EXPECT_EQ(handoff_.Submit(4, 1.0, false),
            absl::FailedPreconditionError("no step is wanted now (submit follows next_step)"));
  ASSERT_TRUE(handoff_.Start(10).ok());
  EXPECT_EQ(handoff_.Start(10), absl::FailedPreconditionError("training has started already"));
}

TEST_F(HandoffWorkloadTest, GradientRangesOutsideTheModelAndNegativeSamplesAreRefused) {
  StartTraining(64, 4, 2, false);
  loop_ = std::thread([&] { (void)handoff_.ComputeGradient(0, 4, nullptr); });
  ASSERT_EQ(*handoff_.Wait(kLong), State::kStepWanted);
  EXPECT_EQ(handoff_.GradientReady(6, 4, false, 8),
            absl::OutOfRangeError("gradient range [6, 10) is outside the model's 8 values"));
  EXPECT_EQ(handoff_.GradientReady(-1, 2, false, 8),
            absl::OutOfRangeError("gradient range [-1, 1) is outside the model's 8 values"));
  EXPECT_EQ(handoff_.Submit(-1, 1.0, false),
            absl::InvalidArgumentError("a step's samples cannot be negative, got -1"));
  ASSERT_TRUE(handoff_.Submit(4, 1.0, false).ok());
}

TEST(HandoffWorkloadNoFp16Test, Fp16IsRefusedWithoutItsBuffer) {
  std::vector<float> grads(8);
  HandoffWorkload handoff(grads.data(), nullptr);
  handoff.Joined(JoinedJob{});
  ASSERT_TRUE(handoff.Start(8).ok());
  std::thread loop([&] { (void)handoff.ComputeGradient(0, 4, nullptr); });
  ASSERT_EQ(*handoff.Wait(kLong), State::kStepWanted);
  EXPECT_EQ(handoff.Submit(4, 1.0, true),
            absl::FailedPreconditionError("this worker has no binary16 gradient buffer"));
  ASSERT_TRUE(handoff.Submit(4, 1.0, false).ok());
  loop.join();
}

// --- Overlapped pulls.

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

TEST_F(HandoffWorkloadTest, WithoutTheOptInTheLoopsParamsNeededIsRefused) {
  StartTraining(64, 4, 2, false);
  EXPECT_FALSE(handoff_.forward_waits());
  Ranges asked;
  EXPECT_FALSE(handoff_.set_params_needed(
      [&](int64_t offset, int64_t count) { asked.emplace_back(offset, count); }));
  loop_ = std::thread([&] { (void)handoff_.ComputeGradient(0, 4, nullptr); });
  ASSERT_EQ(*handoff_.Wait(kLong), State::kStepWanted);
  EXPECT_EQ(*handoff_.RequestParams(0, 8, 8), 0);  // nothing to wait for
  EXPECT_TRUE(handoff_.ParamsNeeded(2, 3, 8).ok());
  ASSERT_TRUE(handoff_.Submit(4, 1.0, false).ok());
  loop_.join();
  EXPECT_EQ(asked, Ranges{});
}

TEST_F(HandoffWorkloadTest, TheOptInComesBeforeTheStart) {
  handoff_.Joined(JoinedJob{});
  ASSERT_TRUE(handoff_.EnableForwardWaits().ok());
  EXPECT_TRUE(handoff_.forward_waits());
  ASSERT_TRUE(handoff_.Start(64).ok());
  EXPECT_EQ(handoff_.EnableForwardWaits(),
            absl::FailedPreconditionError(
                "forward waits are enabled before training starts (before begin_training)"));
  EXPECT_TRUE(handoff_.set_params_needed([](int64_t, int64_t) {}));
}

TEST_F(HandoffWorkloadTest, ParamsNeededIsWaitedForOnTheLoopsThreadDuringAWantedStep) {
  ASSERT_TRUE(handoff_.EnableForwardWaits().ok());
  StartTraining(64, 4, 2, true);
  Ranges asked;
  std::thread::id asked_on;
  ASSERT_TRUE(handoff_.set_params_needed([&](int64_t offset, int64_t count) {
    asked.emplace_back(offset, count);
    asked_on = std::this_thread::get_id();
  }));
  // Before the step (the loop is busy), nothing can be pending: no-ops.
  EXPECT_EQ(*handoff_.RequestParams(0, 8, 8), 0);
  EXPECT_TRUE(handoff_.ParamsNeeded(0, 8, 8).ok());
  absl::StatusOr<std::optional<TestEvaluation>> evaluation;
  loop_ = std::thread([&] {
    (void)handoff_.ComputeGradient(0, 4, nullptr);
    evaluation = handoff_.EvaluateTest(nullptr);
  });
  ASSERT_EQ(*handoff_.Wait(kLong), State::kStepWanted);
  EXPECT_TRUE(handoff_.ParamsNeeded(2, 3, 8).ok());
  EXPECT_EQ(asked_on, loop_.get_id());
  EXPECT_TRUE(handoff_.ParamsNeeded(5, 0, 8).ok());  // empty: not asked
  const int64_t id = *handoff_.RequestParams(0, 8, 8);
  EXPECT_EQ(id, 2);
  EXPECT_TRUE(*handoff_.AwaitParams(id, kLong));
  ASSERT_TRUE(handoff_.Submit(4, 1.0, false).ok());
  // The evaluation the loop waits for (the pull finished before it): a no-op.
  ASSERT_EQ(*handoff_.Wait(kLong), State::kEvaluationWanted);
  EXPECT_EQ(*handoff_.RequestParams(0, 8, 8), 0);
  handoff_.SkipEvaluation();
  loop_.join();
  EXPECT_EQ(asked, (Ranges{{2, 3}, {0, 8}}));
  handoff_.Finish(LoopResult{});
  ASSERT_EQ(*handoff_.Wait(kLong), State::kOver);
  EXPECT_EQ(*handoff_.RequestParams(0, 8, 8), 0);  // after the run
  EXPECT_EQ(asked.size(), 2u);
}

TEST_F(HandoffWorkloadTest, ParamRangesOutsideTheModelAreRefused) {
  ASSERT_TRUE(handoff_.EnableForwardWaits().ok());
  StartTraining(64, 4, 2, false);
  EXPECT_EQ(handoff_.RequestParams(6, 4, 8).status(),
            absl::OutOfRangeError("parameter range [6, 10) is outside the model's 8 values"));
  EXPECT_EQ(handoff_.ParamsNeeded(-1, 2, 8),
            absl::OutOfRangeError("parameter range [-1, 1) is outside the model's 8 values"));
  EXPECT_EQ(handoff_.RequestParams(0, -1, 8).status().code(), absl::StatusCode::kOutOfRange);
}

TEST_F(HandoffWorkloadTest, TheScriptWaitsInSlicesAndCloseEndsTheWait) {
  ASSERT_TRUE(handoff_.EnableForwardWaits().ok());
  StartTraining(64, 4, 2, false);
  absl::Notification pulled;
  ASSERT_TRUE(handoff_.set_params_needed(
      [&](int64_t, int64_t) { pulled.WaitForNotification(); }));
  absl::StatusOr<ComputedStep> computed;
  loop_ = std::thread([&] { computed = handoff_.ComputeGradient(0, 4, nullptr); });
  ASSERT_EQ(*handoff_.Wait(kLong), State::kStepWanted);
  const int64_t id = *handoff_.RequestParams(0, 4, 8);
  EXPECT_FALSE(*handoff_.AwaitParams(id, absl::Milliseconds(20)));  // still pulling
  handoff_.Close(absl::CancelledError("interrupted"));
  EXPECT_EQ(handoff_.AwaitParams(id, kLong).status(), absl::CancelledError("interrupted"));
  pulled.Notify();  // the transport's Stop ends a real pull
  loop_.join();
  EXPECT_EQ(computed.status(), absl::CancelledError("interrupted"));
}

}  // namespace
}  // namespace r2sp
