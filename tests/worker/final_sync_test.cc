// FinalSync over an in-process job (the real SchedulerCore, servers and clients, no sockets):
// the evaluating role is settled when the final barrier is passed. Worker 0 leaving while
// worker 1 waits at the final barrier (no heartbeats run here, so only the news asked after the
// barrier can tell it) makes worker 1 the evaluator; worker 0 arriving keeps it worker 0's.
#include "worker/final_sync.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/status_assert.h"
#include "tests/worker/in_process_job.h"
#include "worker/synthetic_workload.h"

namespace r2sp {
namespace {

SchedulerOptions AspJob() {
  SchedulerOptions options;
  options.num_workers = 2;
  options.partition_bytes = 4096;
  options.sync = proto::ASP;
  options.heartbeat_timeout = absl::Minutes(5);  // no death is found by silence here
  return options;
}

ServerOptions PlainSgd() {
  ServerOptions options;
  options.sgd = {/*learning_rate=*/0.01f, /*momentum=*/0.0f, /*weight_decay=*/0.0f};
  return options;
}

TEST(FinalSyncTest, AWorkerLeavingBeforeTheFinalBarrierHandsOverTheEvaluation) {
  testing::InProcessJob job(AspJob(), PlainSgd(), SyntheticModel(2000, 1));
  ASSERT_OK(job.Start(std::vector<float>(2000, 0.5f)));
  testing::JobWorker& w1 = job.workers()[1];
  EvaluatorRole role(1);
  FinalSync sync(w1.scheduler.get(), w1.ps.get(), &role, w1.registration.book());
  absl::Status passed;
  std::thread waiting([&] { passed = sync.PassBarrier(); });
  ASSERT_OK(job.workers()[0].scheduler->Leave("signal 15", proto::NodeCounters()));
  waiting.join();
  ASSERT_OK(passed);
  EXPECT_TRUE(role.Evaluates());
  // The final parameters land in the buffer; a repeat pulls nothing and changes nothing.
  std::vector<float> params(2000, 0.0f);
  ASSERT_OK(sync.PullFinal(params.data(), 7));
  EXPECT_EQ(params[1999], 0.5f);
  params[0] = -1.0f;
  ASSERT_OK(sync.PullFinal(params.data(), 7));
  EXPECT_EQ(params[0], -1.0f);
  // Passing again is the first pass's outcome (the barrier is passed once).
  ASSERT_OK(sync.PassBarrier());
}

TEST(FinalSyncTest, EveryWorkerArrivingKeepsTheEvaluationWithRankZero) {
  testing::InProcessJob job(AspJob(), PlainSgd(), SyntheticModel(2000, 1));
  ASSERT_OK(job.Start(std::vector<float>(2000, 0.5f)));
  EvaluatorRole role0(0), role1(1);
  EvaluatorRole* roles[2] = {&role0, &role1};
  ASSERT_OK(job.OnEveryWorker([&roles](testing::JobWorker& w) {
    FinalSync sync(w.scheduler.get(), w.ps.get(), roles[w.rank()], w.registration.book());
    return sync.PassBarrier();
  }));
  EXPECT_TRUE(role0.Evaluates());
  EXPECT_FALSE(role1.Evaluates());
}

}  // namespace
}  // namespace r2sp
