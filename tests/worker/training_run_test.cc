// TrainingRun driven step by step from the test's thread, as a script drives it (the Python
// client's ScriptTrainer), over real exchanges (in-process scheduler and server): the known
// gradients give the bsp sums; a misused run says what is wrong; evaluations are due after each
// epoch (the last one after the settle) and pass over when not reported; emulation's pacer
// exists only when asked for, and stretches the step.
#include "worker/training_run.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "tests/testing/status_assert.h"
#include "tests/worker/in_process_job.h"
#include "worker/synthetic_workload.h"

namespace r2sp {
namespace {

SchedulerOptions Job(int workers) {
  SchedulerOptions options;
  options.num_workers = workers;
  options.partition_bytes = 4096;
  options.sync = proto::BSP;
  options.heartbeat_timeout = absl::Minutes(5);
  return options;
}

ServerOptions PlainSgd() {
  ServerOptions options;
  options.sgd = {/*learning_rate=*/0.01f, /*momentum=*/0.0f, /*weight_decay=*/0.0f};
  return options;
}

ExchangerOptions Bsp(int workers) {
  ExchangerOptions mode;
  mode.sync = proto::BSP;
  mode.workers = workers;
  return mode;
}

LoopOptions Loop(int rank, int epochs, int64_t steps) {
  LoopOptions loop;
  loop.rank = rank;
  loop.epochs = epochs;
  loop.steps_per_epoch = steps;
  loop.log_every = 0;
  return loop;
}

// The known gradient of `rank` at `clock` into `grad`, as a step's computed gradient.
ComputedStep KnownStep(int rank, int64_t clock, std::vector<float>* grad) {
  FillKnownGradient(rank, clock, grad->data(), grad->size());
  ComputedStep step;
  step.samples = 4;
  step.loss = 1.0;
  step.grads = HostGradient(grad->data());
  return step;
}

TEST(TrainingRunTest, StepsDrivenByTheCallerGiveTheBspSumAndTheirPlaceInTheEpochs) {
  const std::vector<proto::TensorSpec> model = SyntheticModel(4000, 2);
  testing::InProcessJob job(Job(2), PlainSgd(), model);
  ASSERT_OK(job.Start(std::vector<float>(4000, 0.0f)));
  std::vector<std::vector<std::string>> seen(2);
  std::vector<LoopResult> results(2);
  ASSERT_OK(job.OnEveryWorker([&](testing::JobWorker& w) -> absl::Status {
    Exchanger exchanger(Bsp(2), w.ps.get(), w.scheduler.get(), nullptr);
    RunHooks hooks;
    hooks.start_epoch = [&seen, &w](int epoch, int64_t steps, int64_t skip, int) {
      seen[w.rank()].push_back(absl::StrCat("epoch ", epoch, ": ", steps, " steps, skip ", skip));
    };
    TrainingRun run(Loop(w.rank(), 2, 3), &exchanger, w.params.data(), nullptr, hooks, false);
    std::vector<float> grad(w.params.size());
    while (true) {
      R2SP_ASSIGN_OR_RETURN(const std::optional<RunStep> step, run.Next());
      if (!step.has_value()) break;
      seen[w.rank()].push_back(absl::StrCat(step->clock, ":", step->epoch, "/", step->index, "/",
                                            step->epoch_steps));
      R2SP_RETURN_IF_ERROR(run.Complete(KnownStep(w.rank(), step->clock, &grad)));
    }
    EXPECT_TRUE(run.over());
    R2SP_ASSIGN_OR_RETURN(results[w.rank()], run.Finish());
    return absl::OkStatus();
  }));
  const std::vector<std::string> want = {"epoch 0: 3 steps, skip 0", "0:0/0/3", "1:0/1/3",
                                         "2:0/2/3", "epoch 1: 3 steps, skip 0", "3:1/0/3",
                                         "4:1/1/3", "5:1/2/3"};
  for (const testing::JobWorker& w : job.workers()) {
    EXPECT_EQ(seen[w.rank()], want);
    EXPECT_EQ(results[w.rank()].steps, 6);
    EXPECT_EQ(results[w.rank()].epochs, 2);
    EXPECT_EQ(results[w.rank()].samples, 24);
    // Clock c's mean known gradient is 1.5 + c + (i % 4); six clocks sum to 24 + 6 (i % 4).
    for (size_t i = 0; i < w.params.size(); i += 97) {
      EXPECT_NEAR(w.params[i], -0.01f * (24.0f + 6.0f * (i % 4)), 1e-5) << i;
    }
  }
}

TEST(TrainingRunTest, AStepOutOfTurnIsRefusedWithWhatToDo) {
  const std::vector<proto::TensorSpec> model = SyntheticModel(4000, 2);
  testing::InProcessJob job(Job(1), PlainSgd(), model);
  ASSERT_OK(job.Start(std::vector<float>(4000, 0.0f)));
  ASSERT_OK(job.OnEveryWorker([&](testing::JobWorker& w) -> absl::Status {
    Exchanger exchanger(Bsp(1), w.ps.get(), w.scheduler.get(), nullptr);
    TrainingRun run(Loop(0, 1, 2), &exchanger, w.params.data(), nullptr, RunHooks(), false);
    std::vector<float> grad(w.params.size());
    EXPECT_EQ(run.Complete(KnownStep(0, 0, &grad)),
              absl::FailedPreconditionError(
                  "no step is out: a step is completed once, after Next"));
    EXPECT_EQ(run.Finish().status(),
              absl::FailedPreconditionError("the run is not over: it wants step 1 of 1 of epoch 1"));
    R2SP_ASSIGN_OR_RETURN(std::optional<RunStep> step, run.Next());
    EXPECT_EQ(run.Next().status(),
              absl::FailedPreconditionError("step 0 is out and not completed: each step's "
                                            "gradient is exchanged (completed) before the next "
                                            "step"));
    R2SP_RETURN_IF_ERROR(run.Complete(KnownStep(0, 0, &grad)));
    R2SP_ASSIGN_OR_RETURN(step, run.Next());
    R2SP_RETURN_IF_ERROR(run.Complete(KnownStep(0, 1, &grad)));
    R2SP_ASSIGN_OR_RETURN(step, run.Next());
    EXPECT_FALSE(step.has_value());
    EXPECT_EQ(run.Finish()->steps, 2);
    return absl::OkStatus();
  }));
}

TEST(TrainingRunTest, EvaluationsAreDueAfterEachEpochTheLastAfterTheSettle) {
  const std::vector<proto::TensorSpec> model = SyntheticModel(4000, 2);
  testing::InProcessJob job(Job(1), PlainSgd(), model);
  ASSERT_OK(job.Start(std::vector<float>(4000, 0.0f)));
  ASSERT_OK(job.OnEveryWorker([&](testing::JobWorker& w) -> absl::Status {
    Exchanger exchanger(Bsp(1), w.ps.get(), w.scheduler.get(), nullptr);
    RunHooks hooks;
    hooks.evaluates = [] { return true; };
    LoopOptions loop = Loop(0, 3, 2);
    std::vector<int64_t> settled;
    loop.settle = [&settled](int64_t steps) {
      settled.push_back(steps);
      return absl::OkStatus();
    };
    TrainingRun run(loop, &exchanger, w.params.data(), nullptr, hooks, false);
    std::vector<float> grad(w.params.size());
    std::vector<std::string> due;
    while (true) {
      R2SP_ASSIGN_OR_RETURN(const std::optional<RunStep> step, run.Next());
      if (!step.has_value()) break;
      R2SP_RETURN_IF_ERROR(run.Complete(KnownStep(0, step->clock, &grad)));
      if (!run.evaluation_due()) continue;
      due.push_back(absl::StrCat("after ", step->clock, ", settled ", settled.size()));
      // The first epoch's goes unreported (passed over by Next); the others are reported.
      if (step->epoch > 0) run.Evaluated(TestEvaluation{0.25 * step->epoch, 2.0});
      EXPECT_EQ(run.evaluation_due(), step->epoch == 0);
    }
    EXPECT_EQ(due, (std::vector<std::string>{"after 1, settled 0", "after 3, settled 0",
                                             "after 5, settled 1"}));
    EXPECT_EQ(settled, (std::vector<int64_t>{6}));
    R2SP_ASSIGN_OR_RETURN(const LoopResult result, run.Finish());
    EXPECT_EQ(result.test_accuracy, 0.5);  // the last one reported
    return absl::OkStatus();
  }));
}

TEST(TrainingRunTest, ThePacerExistsOnlyWhenEmulatingAndStretchesTheStep) {
  const std::vector<proto::TensorSpec> model = SyntheticModel(4000, 2);
  testing::InProcessJob job(Job(1), PlainSgd(), model);
  ASSERT_OK(job.Start(std::vector<float>(4000, 0.0f)));
  ASSERT_OK(job.OnEveryWorker([&](testing::JobWorker& w) -> absl::Status {
    Exchanger exchanger(Bsp(1), w.ps.get(), w.scheduler.get(), nullptr);
    TrainingRun plain(Loop(0, 1, 1), &exchanger, w.params.data(), nullptr, RunHooks(), false);
    EXPECT_FALSE(plain.paces());
    LoopOptions emulated = Loop(0, 1, 1);
    emulated.emulate_ms_per_sample = 50;  // 4 samples: at least 200 ms of compute
    TrainingRun run(emulated, &exchanger, w.params.data(), nullptr, RunHooks(), false);
    EXPECT_TRUE(run.paces());
    std::vector<float> grad(w.params.size());
    R2SP_ASSIGN_OR_RETURN(const std::optional<RunStep> step, run.Next());
    const absl::Time start = absl::Now();
    R2SP_RETURN_IF_ERROR(run.Complete(KnownStep(0, step->clock, &grad)));
    EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));
    R2SP_ASSIGN_OR_RETURN(const LoopResult result, run.Finish());
    EXPECT_GE(result.compute_seconds, 0.2);
    return absl::OkStatus();
  }));
}

// The emulated forward's sleeps before its reads (paced at the last step's stretch) are part of
// the step's target, not added to it: a step of 20 ms of real compute paced to 400 ms lasts
// about 400 ms whether its read slept most of that or not.
TEST(TrainingRunTest, PacedReadsArePartOfTheStepsTargetNotAddedToIt) {
  const std::vector<proto::TensorSpec> model = SyntheticModel(4000, 2);
  testing::InProcessJob job(Job(1), PlainSgd(), model);
  ASSERT_OK(job.Start(std::vector<float>(4000, 0.0f)));
  ASSERT_OK(job.OnEveryWorker([&](testing::JobWorker& w) -> absl::Status {
    ExchangerOptions mode = Bsp(1);
    mode.overlap = true;
    mode.overlap_pulls = true;
    mode.bucket_bytes = 4096;
    Exchanger exchanger(mode, w.ps.get(), w.scheduler.get(), nullptr);
    LoopOptions loop = Loop(0, 1, 3);
    loop.emulate_ms_per_sample = 100;  // 4 samples: 400 ms a step
    TrainingRun run(loop, &exchanger, w.params.data(), nullptr, RunHooks(), true);
    EXPECT_TRUE(run.forward_waits());
    std::vector<float> grad(w.params.size());
    while (true) {
      R2SP_ASSIGN_OR_RETURN(const std::optional<RunStep> step, run.Next());
      if (!step.has_value()) break;
      absl::SleepFor(absl::Milliseconds(20));  // the real compute, then forward reads it all
      run.ParamsNeeded(0, static_cast<int64_t>(w.params.size()));
      R2SP_RETURN_IF_ERROR(run.Complete(KnownStep(0, step->clock, &grad)));
    }
    R2SP_ASSIGN_OR_RETURN(const LoopResult result, run.Finish());
    // Three steps of 400 ms; the bug this guards against made each paced one ~780 ms.
    EXPECT_GE(result.compute_seconds, 1.2);
    EXPECT_LT(result.compute_seconds, 1.6);
    return absl::OkStatus();
  }));
}

// A step the caller computed before asking for it (a script's batch loaded ahead takes its
// step at step()) counts its compute from when the caller says it began: hetero batching tunes
// by that time, and a step handed out just before Complete would otherwise count ~0.
TEST(TrainingRunTest, ComputeCountsFromWhenTheCallerBeganIt) {
  const std::vector<proto::TensorSpec> model = SyntheticModel(4000, 2);
  testing::InProcessJob job(Job(1), PlainSgd(), model);
  ASSERT_OK(job.Start(std::vector<float>(4000, 0.0f)));
  ASSERT_OK(job.OnEveryWorker([&](testing::JobWorker& w) -> absl::Status {
    Exchanger exchanger(Bsp(1), w.ps.get(), w.scheduler.get(), nullptr);
    TrainingRun run(Loop(0, 1, 2), &exchanger, w.params.data(), nullptr, RunHooks(), false);
    std::vector<float> grad(w.params.size());
    R2SP_ASSIGN_OR_RETURN(std::optional<RunStep> step, run.Next());
    R2SP_RETURN_IF_ERROR(run.Complete(KnownStep(0, step->clock, &grad)));  // ~0 s
    const absl::Time began = absl::Now();
    absl::SleepFor(absl::Milliseconds(300));  // computed before the step was asked for
    R2SP_ASSIGN_OR_RETURN(step, run.Next());
    ComputedStep computed = KnownStep(0, step->clock, &grad);
    computed.began = began;
    R2SP_RETURN_IF_ERROR(run.Complete(computed));
    R2SP_ASSIGN_OR_RETURN(const LoopResult result, run.Finish());
    EXPECT_GE(result.compute_seconds, 0.3);
    EXPECT_LT(result.compute_seconds, 1.0);
    return absl::OkStatus();
  }));
}

}  // namespace
}  // namespace r2sp
