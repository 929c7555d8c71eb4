// Whole jobs as separate processes on 127.0.0.1: scheduler + 2 servers + 3 workers pushing
// known gradients; the final parameters must be exactly the expected ones. Also: a worker
// killed with SIGKILL is detected and the job still ends; impossible flags, an unreachable
// scheduler and a heartbeat too slow for the scheduler's timeout end a binary with a clear
// error.
#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/model_layout.h"
#include "gtest/gtest.h"
#include "server/sgd.h"
#include "tests/testing/child_process.h"
#include "tests/testing/json.h"
#include "tests/testing/local_job.h"
#include "worker/synthetic_workload.h"

namespace r2sp {
namespace {

using testing::ChildProcess;
using testing::MakeTempDir;
using testing::ReadFile;

constexpr char kScheduler[] = "scheduler/scheduler";
constexpr char kServer[] = "server/server";
constexpr char kWorker[] = "worker/worker";
constexpr double kModelMb = 0.25;  // 65536 floats
constexpr int kLayers = 4;
constexpr int kIterations = 12;

using testing::JobSpec;
using testing::LocalJob;

// A job of the synthetic workload with small partitions, so both servers hold some.
JobSpec SyntheticJob(const std::string& name, int servers, int workers,
                     std::vector<std::string> scheduler_flags,
                     std::vector<std::string> server_flags,
                     std::vector<std::string> worker_flags) {
  JobSpec spec;
  spec.name = name;
  spec.servers = servers;
  spec.workers = workers;
  spec.scheduler_flags = std::move(scheduler_flags);
  spec.scheduler_flags.push_back("--partition_bytes=16384");
  spec.server_flags = std::move(server_flags);
  spec.worker_flags = std::move(worker_flags);
  spec.worker_flags.push_back(absl::StrCat("--model_mb=", kModelMb));
  spec.worker_flags.push_back(absl::StrCat("--layers=", kLayers));
  spec.worker_flags.push_back("--dump_params={dir}/params{i}.bin");
  return spec;
}

std::vector<float> ReadParams(const std::string& path) {
  const std::string bytes = ReadFile(path);
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

size_t ModelFloats() { return static_cast<size_t>(kModelMb * 1024 * 1024 / 4); }

void ExpectBothServersHoldData() {
  auto layout = ModelLayout::Create(SyntheticModel(ModelFloats(), kLayers), 16384, 2);
  ASSERT_TRUE(layout.ok());
  EXPECT_GT(layout->BytesOf(0), 0u);
  EXPECT_GT(layout->BytesOf(1), 0u);
}

// Every mode that applies gradients on arrival (asp, ssp, r2sp) must apply each exactly once.
class ApplyOnArrivalTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ApplyOnArrivalTest, FinalParametersAreTheSumOfAllUpdates) {
  ExpectBothServersHoldData();
  LocalJob job(SyntheticJob(GetParam(), 2, 3, {"--sync=" + GetParam(), "--staleness=1"},
                            {"--lr=0.5", "--momentum=0"},
                            {"--grad=known", "--init=zero",
                             absl::StrCat("--iterations=", kIterations)}));
  ASSERT_TRUE(job.WaitAll(absl::Seconds(60)));
  // w = 0 - lr * sum over workers r and clocks c of (r + 1 + c + i % 4): exact in fp32.
  const size_t n = ModelFloats();
  for (int w = 0; w < 3; ++w) {
    std::vector<float> params = ReadParams(absl::StrCat(job.dir(), "/params", w, ".bin"));
    ASSERT_EQ(params.size(), n);
    for (size_t i = 0; i < n; ++i) {
      float sum = 0;
      for (int r = 0; r < 3; ++r) {
        for (int c = 0; c < kIterations; ++c) sum += static_cast<float>(r + 1 + c + i % 4);
      }
      ASSERT_EQ(params[i], -0.5f * sum) << "worker " << w << " element " << i;
    }
  }
  const std::string stats = job.Stats();
  absl::StatusOr<testing::Json> json = testing::ParseJson(stats);
  ASSERT_TRUE(json.ok()) << json.status() << "\n" << stats;
  ASSERT_EQ((*json)["workers"].array.size(), 3u) << stats;
  for (const testing::Json& worker : (*json)["workers"].array) {
    EXPECT_EQ(worker["iterations"].number, kIterations) << stats;
  }
  EXPECT_EQ(stats.find("\"dead\""), std::string::npos) << stats;
  if (GetParam() == "r2sp") {  // one slot per worker per iteration
    EXPECT_EQ((*json)["slot_grants"].number, 3 * kIterations) << stats;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, ApplyOnArrivalTest, ::testing::Values("asp", "ssp", "r2sp"));

TEST(ClusterTest, SyncFinalParametersFollowThePerClockAverages) {
  LocalJob job(SyntheticJob("sync", 2, 3, {"--sync=bsp"}, {"--lr=0.5", "--momentum=0.5"},
                            {"--grad=known", "--init=zero",
                             absl::StrCat("--iterations=", kIterations)}));
  ASSERT_TRUE(job.WaitAll(absl::Seconds(60)));
  // Replay: each clock's update is the average of the three workers' gradients.
  const size_t n = ModelFloats();
  std::vector<float> w(n, 0.0f), m(n, 0.0f), sum(n), g(n);
  for (int c = 0; c < kIterations; ++c) {
    std::fill(sum.begin(), sum.end(), 0.0f);
    for (int r = 0; r < 3; ++r) {
      FillKnownGradient(r, c, g.data(), n);
      for (size_t i = 0; i < n; ++i) sum[i] += g[i];
    }
    SgdApply({0.5f, 0.5f, 0.0f}, 1.0f / 3, sum.data(), w.data(), w.data(), m.data(), n);
  }
  for (int k = 0; k < 3; ++k) {
    std::vector<float> params = ReadParams(absl::StrCat(job.dir(), "/params", k, ".bin"));
    ASSERT_EQ(params.size(), n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(params[i], w[i]) << "worker " << k << " element " << i;
    }
  }
}

TEST(ClusterTest, KilledWorkerIsDetectedAndTheJobStillEnds) {
  LocalJob job(SyntheticJob("kill", 1, 2, {"--sync=asp"}, {},
                            {"--iterations=40", "--compute_ms=50"}));
  // Let the job get going, then kill worker 1 without a chance to say goodbye.
  absl::SleepFor(absl::Milliseconds(1500));
  job.worker(1).Kill(SIGKILL);
  EXPECT_EQ(job.worker(1).Wait(absl::Seconds(5)), 128 + SIGKILL);
  EXPECT_EQ(job.worker(0).Wait(absl::Seconds(60)), 0) << job.worker(0).Log();
  EXPECT_EQ(job.server(0).Wait(absl::Seconds(30)), 0) << job.server(0).Log();
  EXPECT_EQ(job.scheduler().Wait(absl::Seconds(30)), 0) << job.scheduler().Log();
  // Ranks follow registration order, so the killed process may hold either rank.
  EXPECT_NE(job.scheduler().Log().find("declared dead"), std::string::npos)
      << job.scheduler().Log();
  EXPECT_NE(job.Stats().find("\"state\": \"dead\""), std::string::npos);
}

TEST(ClusterTest, ImpossibleFlagsStopTheBinaryWithAClearMessage) {
  const std::string dir = MakeTempDir("flags");
  struct Case {
    std::vector<std::string> argv;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{kWorker, "--iterations=-1"},
       "--iterations (WorkerOptions.iterations) must be >= 0, got -1"},
      {{kWorker, "--early_pulls", "--overlap"},
       "--early_pulls (WorkerOptions.exchange.early_pulls) does not go with --overlap"},
      {{kWorker, "--register_wait_s=0"},
       "--register_wait_s (NodeConnectionOptions.register_timeout) must be >= 1s, got 0"},
      {{kWorker, "--model_mb=0"}, "--model_mb"},
      {{kServer, "--momentum=1.5"}, "--momentum"},
      {{kServer, "--apply_threads=0"},
       "--apply_threads=0: give auto, or a thread count from 1 to 64"},
      {{kServer, "--resume"}, "--resume (ServerNodeOptions.resume) needs --checkpoint_dir"},
      {{kScheduler, "--heartbeat_timeout_ms=50"},
       "--heartbeat_timeout_ms (SchedulerOptions.heartbeat_timeout) must be >= 100ms, got 50ms"},
      {{kScheduler, "--num_workers=0"}, "--num_workers"},
      {{kScheduler, "--sync=fast"}, "--sync must be one of"},
      {{kScheduler, "--r2sp_slot_width=0"}, "--r2sp_slot_width must be auto or a number"},
      {{kScheduler, "--bind=tcp://nowhere:notaport"}, "cannot bind"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    ChildProcess p(cases[i].argv, absl::StrCat(dir, "/case", i, ".log"));
    EXPECT_EQ(p.Wait(absl::Seconds(10)), 2) << p.Log();
    EXPECT_NE(p.Log().find(cases[i].message), std::string::npos) << p.Log();
  }
}

// tools/pylib spells and checks codec names by asking the worker (--print_codec) rather than
// keeping a copy of the grammar: the canonical form, or the refusal a --push_codec would get.
TEST(ClusterTest, TheWorkerPrintsACodecsCanonicalFormOrWhyItRefusesIt) {
  const std::string dir = MakeTempDir("print_codec");
  struct Case {
    std::string text;
    int status;
    std::string output;
  };
  const std::vector<Case> cases = {
      {"FP16", 0, "fp16\n"},
      {"TopK:1e-2,FP16", 0, "topk:0.01,fp16\n"},
      {"csc:0.05,chunk=4096", 0, "csc:0.05,chunk=4096\n"},
      {"fp16_delta", 2,
       "worker: error: --push_codec (WorkerOptions.ps.push_codec) must be fp32, fp16, topk or "
       "csc (fp16_delta is for pulls), got 'fp16_delta'\n"},
      {"topk:2", 2,
       "worker: error: --push_codec=topk:2: the ratio must be a number in (0, 1] (want fp32, "
       "fp16, topk:RATIO[,fp16][,exact], csc:RATIO[,fp16][,chunk=N] or, for pulls, "
       "fp16_delta)\n"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    ChildProcess p({kWorker, "--print_codec=" + cases[i].text},
                   absl::StrCat(dir, "/case", i, ".log"));
    EXPECT_EQ(p.Wait(absl::Seconds(10)), cases[i].status) << cases[i].text;
    EXPECT_EQ(p.Log(), cases[i].output) << cases[i].text;
  }
}

// A node whose heartbeats are too slow for the scheduler's timeout would be declared dead
// between two of them: the scheduler refuses it at registration, naming both values, and the
// node exits as for a bad flag.
TEST(ClusterTest, ANodeWithTooSlowAHeartbeatIsRefusedAtRegistration) {
  const std::string dir = MakeTempDir("slowbeat");
  const std::string endpoint = absl::StrCat("tcp://127.0.0.1:", testing::FreePort());
  ChildProcess scheduler({kScheduler, "--bind=" + endpoint, "--heartbeat_timeout_ms=1000",
                          "--register_timeout_s=30"},
                         dir + "/scheduler.log");
  for (const char* binary : {kWorker, kServer}) {
    ChildProcess node({binary, "--scheduler=" + endpoint, "--bind=tcp://127.0.0.1:*",
                       "--heartbeat_ms=501", "--scheduler_timeout_s=5"},
                      absl::StrCat(dir, "/", binary[0] == 'w' ? "worker" : "server", ".log"));
    EXPECT_EQ(node.Wait(absl::Seconds(20)), 2) << node.Log();
    EXPECT_NE(node.Log().find("registration refused: this node's heartbeat period "
                              "(--heartbeat_ms=501) cannot meet the scheduler's heartbeat "
                              "timeout (--heartbeat_timeout_ms=1000)"),
              std::string::npos)
        << node.Log();
  }
  scheduler.Kill(SIGTERM);
}

// The nodes' --register_timeout_s is a deprecated alias of --register_wait_s: it still works,
// with a warning.
TEST(ClusterTest, TheNodesOldRegisterTimeoutFlagStillWorksWithAWarning) {
  const std::string dir = MakeTempDir("oldflag");
  ChildProcess worker({kWorker, absl::StrCat("--scheduler=tcp://127.0.0.1:", testing::FreePort()),
                       "--register_timeout_s=1"},
                      dir + "/worker.log");
  EXPECT_EQ(worker.Wait(absl::Seconds(20)), 1) << worker.Log();
  EXPECT_NE(worker.Log().find("--register_timeout_s is deprecated for servers and workers: use "
                              "--register_wait_s"),
            std::string::npos)
      << worker.Log();
  EXPECT_NE(worker.Log().find("within 1s"), std::string::npos) << worker.Log();
}

TEST(ClusterTest, WorkerWithoutSchedulerGivesUpWithAClearError) {
  const std::string dir = MakeTempDir("noscheduler");
  ChildProcess worker({kWorker, absl::StrCat("--scheduler=tcp://127.0.0.1:", testing::FreePort()),
                       "--register_wait_s=1"},
                      dir + "/worker.log");
  EXPECT_EQ(worker.Wait(absl::Seconds(20)), 1) << worker.Log();
  EXPECT_NE(worker.Log().find("no answer from the scheduler"), std::string::npos)
      << worker.Log();
}

}  // namespace
}  // namespace r2sp
