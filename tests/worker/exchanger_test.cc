// The Exchanger against the real scheduler and server logic, in-process: each mode's exchange
// gives the parameters that mode promises, every metric is filled in, and the batch-size
// channel follows the scheduler (r2sp slot grants; REPORT replies in the other modes, elastic
// averaging's included).
#include "worker/exchanger.h"

#include <cmath>
#include <vector>

#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "tests/testing/status_assert.h"
#include "tests/worker/in_process_job.h"

namespace r2sp {
namespace {


constexpr int kElements = 1000;

std::vector<proto::TensorSpec> Model() {
  proto::TensorSpec t;
  t.set_name("w");
  t.set_num_elements(kElements);
  return {t};
}

SchedulerOptions Job(proto::SyncMode sync, int workers) {
  SchedulerOptions options;
  options.num_servers = 2;
  options.num_workers = workers;
  options.partition_bytes = 1024;  // 256 floats: 4 partitions over 2 servers
  options.sync = sync;
  options.heartbeat_timeout = absl::Minutes(5);  // no heartbeats here
  return options;
}

ServerOptions PlainSgd() {
  ServerOptions options;
  options.sgd = {/*learning_rate=*/0.1f, /*momentum=*/0.0f, /*weight_decay=*/0.0f};
  return options;
}

// An iteration that has just computed `grad` and has `left` iterations to go, this one included.
ExchangeStep StepOf(const std::vector<float>& grad, testing::JobWorker& w, int64_t left) {
  ExchangeStep step;
  step.grads = grad.data();
  step.params = w.params.data();
  step.computed = absl::Now();
  step.iterations_left = left;
  return step;
}

// An iteration about to compute, at the start of training.
ComputeStart StartOf(int64_t clock, int batch, int64_t left, float* params) {
  ComputeStart start;
  start.clock = clock;
  start.batch = batch;
  start.iterations_left = left;
  start.params = params;
  return start;
}

ExchangerOptions ModeOf(const testing::JobWorker& w) {
  ExchangerOptions mode;
  mode.sync = w.registration.book().sync();
  mode.staleness = w.registration.book().staleness();
  mode.hetero_batching = w.registration.book().hetero_batching();
  mode.workers = w.registration.book().workers_size();
  mode.global_batch = w.registration.book().global_batch();
  mode.initial_batch = w.registration.book().initial_batch();
  mode.elastic.period = w.registration.book().elastic_period();
  mode.elastic.alpha = static_cast<float>(w.registration.book().elastic_alpha());
  return mode;
}

TEST(ExchangerTest, BspExchangeGivesTheAverageStepOfEveryWorker) {
  testing::InProcessJob job(Job(proto::BSP, 2), PlainSgd(), Model());
  ASSERT_OK(job.Start(std::vector<float>(kElements, 1.0f)));
  ASSERT_OK(job.OnEveryWorker([](testing::JobWorker& w) -> absl::Status {
                   Exchanger exchanger(ModeOf(w), w.ps.get(), w.scheduler.get(), nullptr);
                   for (int clock = 0; clock < 3; ++clock) {
                     // Worker r pushes r + 1 everywhere: the mean step is 1.5 * lr.
                     std::vector<float> grad(kElements, w.rank() + 1.0f);
                     IterationMetrics m;
                     m.clock = clock;
                     const ExchangeStep step = StepOf(grad, w, 3 - clock);
                     R2SP_RETURN_IF_ERROR(exchanger.Exchange(step, &m));
                     if (m.push_bytes != kElements * sizeof(float) || m.push_seconds <= 0 ||
                         m.pull_seconds <= 0) {
                       return absl::InternalError("metrics not filled in");
                     }
                     // BSP: the pull waited for the other worker's push of this clock.
                     const float want = 1.0f - 0.1f * 1.5f * (clock + 1);
                     for (float p : w.params) {
                       if (std::abs(p - want) > 1e-5) {
                         return absl::InternalError(absl::StrCat("clock ", clock, ": ", p,
                                                                 " != ", want));
                       }
                     }
                   }
                   return absl::OkStatus();
                 }));
}

// Two workers whose compute rates differ 4x: the tuner gives the fast one the bigger batch,
// through slot grants (r2sp) or REPORT replies (asp, eawild), and the batches sum to B.
void ExpectBatchesFollowThroughput(proto::SyncMode sync) {
  SchedulerOptions options = Job(sync, 2);
  options.slots.hetero_batching = true;
  options.slots.batching.global_batch = 64;
  options.slots.order = SlotOrder::kFirstCome;
  testing::InProcessJob job(options, PlainSgd(), Model());
  ASSERT_OK(job.Start(std::vector<float>(kElements, 0.0f)));
  std::vector<int> final_batch(2);
  ASSERT_OK(job.OnEveryWorker([&final_batch](testing::JobWorker& w) -> absl::Status {
                   Exchanger exchanger(ModeOf(w), w.ps.get(), w.scheduler.get(), nullptr);
                   if (exchanger.next_batch() != 32) return absl::InternalError("initial batch");
                   std::vector<float> grad(kElements, 0.0f);
                   for (int clock = 0; clock < 20; ++clock) {
                     IterationMetrics m;
                     m.clock = clock;
                     m.batch = exchanger.next_batch();
                     // Worker 0 computes a sample in 1 ms, worker 1 in 4 ms.
                     m.compute_seconds = m.batch * (w.rank() == 0 ? 0.001 : 0.004);
                     const ExchangeStep step = StepOf(grad, w, 20 - clock);
                     R2SP_RETURN_IF_ERROR(exchanger.Exchange(step, &m));
                     absl::SleepFor(absl::Milliseconds(2));  // REPLY callbacks land
                   }
                   final_batch[w.rank()] = exchanger.next_batch();
                   return absl::OkStatus();
                 }));
  EXPECT_GT(final_batch[0], final_batch[1] * 2) << final_batch[0] << " vs " << final_batch[1];
  EXPECT_NEAR(final_batch[0] + final_batch[1], 64, 1);
}

TEST(ExchangerTest, R2spSlotGrantsCarryTheTunedBatch) {
  ExpectBatchesFollowThroughput(proto::R2SP);
}

TEST(ExchangerTest, AspReportRepliesCarryTheTunedBatch) {
  ExpectBatchesFollowThroughput(proto::ASP);
}

TEST(ExchangerTest, EawildReportRepliesCarryTheTunedBatch) {
  ExpectBatchesFollowThroughput(proto::EAWILD);
}

TEST(ExchangerTest, AspPushIsWeightedByItsShareOfTheGlobalBatch) {
  // Per-sample updates (the default): a push of b_i = 16 of B = 64 samples moves the weights
  // by lr * 16/64 * g without momentum.
  testing::InProcessJob plain(Job(proto::ASP, 1), PlainSgd(), Model());
  ASSERT_OK(plain.Start(std::vector<float>(kElements, 0.0f)));
  testing::JobWorker& w = plain.workers()[0];
  ExchangerOptions mode = ModeOf(w);
  mode.global_batch = 64;
  Exchanger exchanger(mode, w.ps.get(), w.scheduler.get(), nullptr);
  std::vector<float> grad(kElements, 1.0f);
  IterationMetrics m;
  m.batch = 16;
  const ExchangeStep step = StepOf(grad, w, 1);
  ASSERT_OK(exchanger.Exchange(step, &m));
  EXPECT_FLOAT_EQ(w.params[0], -0.1f * 0.25f);
  EXPECT_EQ(m.wait_seconds, m.parked_seconds);  // no slot to wait for outside r2sp
}

// Two of a job's four workers died and the survivors train their data (an epoch planned with
// 2 live workers): B is the 2 survivors' batches, so each push of 16 is half a step.
TEST(ExchangerTest, LiveWorkersOfAPlannedEpochMakeTheGlobalBatch) {
  testing::InProcessJob plain(Job(proto::ASP, 1), PlainSgd(), Model());
  ASSERT_OK(plain.Start(std::vector<float>(kElements, 0.0f)));
  testing::JobWorker& w = plain.workers()[0];
  ExchangerOptions mode = ModeOf(w);
  mode.global_batch = 64;
  mode.initial_batch = 16;
  mode.workers = 4;
  Exchanger exchanger(mode, w.ps.get(), w.scheduler.get(), nullptr);
  exchanger.SetLiveWorkers(2);
  std::vector<float> grad(kElements, 1.0f);
  IterationMetrics m;
  m.batch = 16;
  ASSERT_OK(exchanger.Exchange(StepOf(grad, w, 1), &m));
  EXPECT_FLOAT_EQ(w.params[0], -0.1f * 0.5f);
}

// r2sp with --overlap (early_slot.h): from the second iteration on the worker asks for its slot
// during backward, the grant opens the gate, and the partitions complete by then are pushed
// before backward ends; the step is the same, and no wait is counted after compute.
TEST(ExchangerTest, R2spWithOverlapAsksForTheSlotDuringBackwardAndPushesOnceGranted) {
  testing::InProcessJob job(Job(proto::R2SP, 1), PlainSgd(), Model());
  ASSERT_OK(job.Start(std::vector<float>(kElements, 1.0f)));
  testing::JobWorker& w = job.workers()[0];
  ExchangerOptions mode = ModeOf(w);
  mode.overlap = true;
  mode.bucket_bytes = 0;
  Exchanger exchanger(mode, w.ps.get(), w.scheduler.get(), nullptr);
  ASSERT_TRUE(exchanger.overlaps_backward());
  std::vector<float> grad(kElements, 1.0f);
  for (int clock = 0; clock < 4; ++clock) {
    IterationMetrics m;
    m.clock = clock;
    m.batch = 8;
    const uint64_t pushed_before = w.ps->counters().pushes;
    exchanger.BeginCompute(StartOf(clock, m.batch, 4 - clock, nullptr));
    absl::SleepFor(absl::Milliseconds(5));
    // Partitions are [0,256) [256,512) [512,768) [768,1000): this completes the last two,
    // which go out once the slot is granted (the first iteration has no prediction, so it
    // asks after compute, as without overlap).
    exchanger.GradientReady(grad.data(), 500, 500);
    absl::SleepFor(absl::Milliseconds(200));  // the rest of backward
    EXPECT_EQ(w.ps->counters().pushes - pushed_before, clock == 0 ? 0u : 2u) << clock;
    exchanger.GradientReady(grad.data(), 0, 500);  // backward's last report
    m.compute_seconds = 0.001;  // predicted compute shorter than a push: ask at the start
    ASSERT_OK(exchanger.Exchange(StepOf(grad, w, 4 - clock), &m));
    EXPECT_EQ(m.early_partitions, clock == 0 ? 0 : 4) << "clock " << clock;
    if (clock > 0) EXPECT_EQ(m.wait_seconds, m.parked_seconds) << "granted during backward";
    for (float p : w.params) ASSERT_NEAR(p, 1.0f - 0.1f * (clock + 1), 1e-5) << clock;
  }
}

// Early pulls with overlap where the compute reads its own copy of the parameters (the Python
// client's CUDA models): each partition is pulled once its push is acknowledged, during
// backward, and a pull left running into the next forward is waited for before the next
// iteration's first pull can follow a push.
TEST(ExchangerTest, WithStagedParametersPullsFollowThePushesDuringBackward) {
  testing::InProcessJob job(Job(proto::ASP, 1), PlainSgd(), Model());
  ASSERT_OK(job.Start(std::vector<float>(kElements, 1.0f)));
  testing::JobWorker& w = job.workers()[0];
  ExchangerOptions mode = ModeOf(w);
  mode.overlap = true;
  mode.overlap_pulls = true;
  mode.early_pulls = true;
  mode.params_staged = true;
  mode.bucket_bytes = 0;
  Exchanger exchanger(mode, w.ps.get(), w.scheduler.get(), nullptr);
  std::vector<float> grad(kElements, 1.0f);
  constexpr int kClocks = 3;
  for (int clock = 0; clock < kClocks; ++clock) {
    IterationMetrics m;
    m.clock = clock;
    m.batch = 8;
    exchanger.BeginCompute(StartOf(clock, m.batch, kClocks - clock, w.params.data()));
    // Partitions [512,768) and [768,1000) complete: pushed, then pulled, before backward ends.
    exchanger.GradientReady(grad.data(), 500, 500);
    const float stepped = 1.0f - 0.1f * (clock + 1);
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (std::abs(w.params[999] - stepped) > 1e-5f && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    EXPECT_NEAR(w.params[512], stepped, 1e-5) << clock;
    EXPECT_NEAR(w.params[999], stepped, 1e-5) << clock;
    EXPECT_NEAR(w.params[0], stepped + 0.1f, 1e-5) << "not pushed yet at clock " << clock;
    exchanger.GradientReady(grad.data(), 0, 500);  // backward's last report
    ExchangeStep step = StepOf(grad, w, kClocks - clock);
    step.forward_waits = true;
    ASSERT_OK(exchanger.Exchange(step, &m));
    EXPECT_EQ(m.pull_overlapped, clock + 1 < kClocks) << clock;
    ASSERT_OK(exchanger.FinishPull());
    for (float p : w.params) ASSERT_NEAR(p, stepped, 1e-5) << clock;
  }
}

}  // namespace
}  // namespace r2sp
