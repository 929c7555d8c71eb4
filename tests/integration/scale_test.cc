// Many workers against one scheduler, as threads of a few worker processes
// (--workers_per_process): the real scheduler, servers and worker binaries on 127.0.0.1. Two
// processes of 4 threads are 8 workers with 8 distinct ranks; 128 workers in 4 processes train
// in r2sp, every one registers and finishes, and the scheduler's own instrumentation (its stats
// JSON's "scale") shows that no two slot grants ever overlapped on its clock.
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/child_process.h"
#include "tests/testing/json.h"
#include "tests/testing/local_job.h"

namespace r2sp {
namespace {

using testing::Json;
using testing::JobSpec;
using testing::LocalJob;

// `processes` worker processes of `threads` workers each, on `servers` servers, training the
// synthetic model for `iterations`; heartbeats relaxed for a loaded 2-core machine.
JobSpec ThreadedJob(const std::string& name, int servers, int processes, int threads,
                    int iterations, const std::string& sync) {
  JobSpec spec;
  spec.name = name;
  spec.servers = servers;
  spec.workers = processes;
  spec.scheduler_flags = {absl::StrCat("--num_workers=", processes * threads), "--sync=" + sync,
                          "--heartbeat_timeout_ms=10000", "--partition_bytes=16384"};
  spec.server_flags = {"--heartbeat_ms=1000"};
  spec.worker_flags = {absl::StrCat("--workers_per_process=", threads), "--model_mb=0.0625",
                       "--layers=2", absl::StrCat("--iterations=", iterations),
                       "--compute_ms=20", "--heartbeat_ms=1000", "--log_every=1000",
                       "--metrics={dir}/metrics{i}.jsonl"};
  return spec;
}

// The stats JSON's workers: each must have finished `iterations`; their ranks.
std::set<int> FinishedRanks(const Json& stats, int iterations) {
  std::set<int> ranks;
  const Json& workers = stats["workers"];
  for (size_t i = 0; i < workers.array.size(); ++i) {
    const Json& w = workers[i];
    EXPECT_EQ(w["state"].string, "finished") << "worker " << w["rank"].number;
    EXPECT_EQ(w["iterations"].number, iterations) << "worker " << w["rank"].number;
    ranks.insert(static_cast<int>(w["rank"].number));
  }
  return ranks;
}

TEST(ScaleTest, TwoProcessesOfFourThreadsAreEightWorkersWithDistinctRanks) {
  LocalJob job(ThreadedJob("scale_8", /*servers=*/1, /*processes=*/2, /*threads=*/4,
                           /*iterations=*/5, "asp"));
  ASSERT_TRUE(job.WaitAll(absl::Seconds(120)));
  absl::StatusOr<Json> stats = testing::ParseJson(job.Stats());
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(FinishedRanks(*stats, 5), (std::set<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  // Each thread wrote its own metrics (thread K of process P: metricsP_tK.jsonl), and the
  // ranks the workers themselves report are the same 8.
  std::set<int> reported;
  for (int p = 0; p < 2; ++p) {
    for (int k = 0; k < 4; ++k) {
      const std::string path = absl::StrCat(job.dir(), "/metrics", p, "_t", k, ".jsonl");
      absl::StatusOr<std::vector<Json>> rows = testing::ParseJsonLines(testing::ReadFile(path));
      ASSERT_TRUE(rows.ok() && !rows->empty()) << path;
      reported.insert(static_cast<int>((*rows)[0]["worker"].number));
    }
  }
  EXPECT_EQ(reported.size(), 8u);
}

TEST(ScaleTest, HundredTwentyEightWorkersRegisterFinishAndGrantsNeverOverlap) {
  constexpr int kWorkers = 128, kIterations = 8;
  LocalJob job(ThreadedJob("scale_128", /*servers=*/2, /*processes=*/4, /*threads=*/32,
                           kIterations, "r2sp"));
  ASSERT_TRUE(job.WaitAll(absl::Seconds(240)));
  absl::StatusOr<Json> stats = testing::ParseJson(job.Stats());
  ASSERT_TRUE(stats.ok()) << stats.status();
  const std::set<int> ranks = FinishedRanks(*stats, kIterations);
  EXPECT_EQ(ranks.size(), static_cast<size_t>(kWorkers));
  EXPECT_EQ(*ranks.rbegin(), kWorkers - 1);
  EXPECT_EQ((*stats)["slot_grants"].number, kWorkers * kIterations);
  const Json& scale = (*stats)["scale"];
  EXPECT_GT(scale["all_registered_unix_us"].number, 0);
  const Json& slots = scale["slots"];
  EXPECT_EQ(slots["grant_latency_ms"]["count"].number, kWorkers * kIterations);
  // Width 1: one holder at a time, counted from the grants and releases themselves.
  EXPECT_EQ(slots["max_holders"].number, 1);
  EXPECT_EQ(slots["grants_beyond_width"].number, 0);
}

}  // namespace
}  // namespace r2sp
