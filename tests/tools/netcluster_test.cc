// tools/netcluster on this machine: 1 scheduler, 1 server and 2 workers, each in its own network
// namespace, the server's link shaped to 50 Mbit/s. The self-check's measured rate must be
// within 15% of the setting, a short job must complete across the namespaces, and nothing may
// be left behind (namespaces, veths, processes). With --colocate, server 0 runs on worker 0's
// machine: one namespace, one address, one shaped link. With --time_dilation the link runs at
// its rate over the dilation. Needs root; reports itself skipped otherwise.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/child_process.h"
#include "tests/testing/json.h"

namespace r2sp {
namespace {

std::string Shell(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

// The rate the self-check line in `log` measured, in Mbit/s (-1 without one).
double SelfCheckMbit(const std::string& log) {
  const std::string key = "self-check: ";
  const size_t at = log.find(key);
  double mbit = -1;
  if (at == std::string::npos) return mbit;
  const size_t start = at + key.size();
  if (!absl::SimpleAtod(log.substr(start, log.find(' ', start) - start), &mbit)) return -1;
  return mbit;
}

#define SKIP_WITHOUT_NAMESPACES()                                                          \
  do {                                                                                     \
    if (geteuid() != 0) GTEST_SKIP() << "netcluster needs root";                           \
    if (Shell("ip netns list >/dev/null 2>&1 && echo ok").find("ok") == std::string::npos) { \
      GTEST_SKIP() << "network namespaces are not available here";                         \
    }                                                                                      \
  } while (0)

TEST(NetclusterTest, ShapedLinkSelfCheckJobAndTeardown) {
  SKIP_WITHOUT_NAMESPACES();
  const std::string dir = testing::MakeTempDir("netcluster");
  testing::ChildProcess run({"/usr/bin/python3", "tools/netcluster", "--bin_dir=.", "--servers=1",
                             "--workers=2", "--server_link=50mbit", "--self_check", "--quiet",
                             "--run_dir=" + dir + "/run", "--timeout=120",
                             "--worker_flags=--model_mb=1 --iterations=5"},
                            dir + "/netcluster.log");
  const std::optional<int> code = run.Wait(absl::Seconds(180));
  const std::string log = run.Log();
  ASSERT_EQ(code, 0) << log;
  EXPECT_NEAR(SelfCheckMbit(log), 50.0, 0.15 * 50.0) << log;
  EXPECT_NE(log.find("torn down"), std::string::npos) << log;
  const std::string summary = testing::ReadFile(dir + "/run/summary.json");
  absl::StatusOr<testing::Json> json = testing::ParseJson(summary);
  ASSERT_TRUE(json.ok()) << json.status() << "\n" << summary;
  EXPECT_EQ((*json)["iterations"].number, 5) << summary;
  EXPECT_FALSE(testing::ReadFile(dir + "/run/link_bytes.jsonl").empty());
  // Nothing left: this run's namespaces (their veths go with them), processes.
  const std::string tag = absl::StrCat("r2sp", run.pid(), "-");
  EXPECT_EQ(Shell("ip netns list").find(tag), std::string::npos) << Shell("ip netns list");
  // "[r]un" so that the shell running pgrep, whose arguments hold the pattern, does not match.
  EXPECT_EQ(Shell("pgrep -f " + dir + "/[r]un"), "");
}

// --colocate: server 0 shares worker 0's machine. hosts.json places both in one namespace with
// one address and one link; the server really listened there (the scheduler's stats), the
// self-check into server 0 (from worker 1's machine) meets worker 0's 50 Mbit/s shaping, and
// the link counters logged for server 0 are worker 0's.
TEST(NetclusterTest, ColocatedServerSharesItsWorkersAddressAndLink) {
  SKIP_WITHOUT_NAMESPACES();
  const std::string dir = testing::MakeTempDir("netcluster_colocate");
  testing::ChildProcess run({"/usr/bin/python3", "tools/netcluster", "--bin_dir=.", "--servers=1",
                             "--workers=2", "--colocate", "--worker_link=50mbit", "--self_check",
                             "--quiet", "--run_dir=" + dir + "/run", "--timeout=120",
                             "--worker_flags=--model_mb=1 --iterations=5"},
                            dir + "/netcluster.log");
  const std::optional<int> code = run.Wait(absl::Seconds(180));
  const std::string log = run.Log();
  ASSERT_EQ(code, 0) << log;
  EXPECT_NE(log.find("3 machines in namespaces"), std::string::npos) << log;
  EXPECT_NE(log.find("Mbit/s into server0 of 50.0 Mbit/s configured"), std::string::npos) << log;
  EXPECT_NEAR(SelfCheckMbit(log), 50.0, 0.15 * 50.0) << log;

  const std::string hosts_text = testing::ReadFile(dir + "/run/hosts.json");
  absl::StatusOr<testing::Json> hosts = testing::ParseJson(hosts_text);
  ASSERT_TRUE(hosts.ok()) << hosts.status() << "\n" << hosts_text;
  const testing::Json& server = (*hosts)["server0"];
  const testing::Json& worker = (*hosts)["worker0"];
  EXPECT_EQ(server["machine"].string, "worker0") << hosts_text;
  EXPECT_EQ(server["namespace"].string, worker["namespace"].string) << hosts_text;
  EXPECT_EQ(server["address"].string, worker["address"].string) << hosts_text;
  EXPECT_EQ(server["link"].string, "50mbit") << hosts_text;
  EXPECT_EQ(worker["link"].string, "50mbit") << hosts_text;
  EXPECT_NE((*hosts)["worker1"]["address"].string, worker["address"].string) << hosts_text;

  const std::string stats_text = testing::ReadFile(dir + "/run/stats.json");
  absl::StatusOr<testing::Json> stats = testing::ParseJson(stats_text);
  ASSERT_TRUE(stats.ok()) << stats.status() << "\n" << stats_text;
  EXPECT_EQ((*stats)["servers"][0]["endpoint"].string.rfind(
                "tcp://" + worker["address"].string + ":", 0),
            0u)
      << stats_text;

  absl::StatusOr<std::vector<testing::Json>> links =
      testing::ParseJsonLines(testing::ReadFile(dir + "/run/link_bytes.jsonl"));
  ASSERT_TRUE(links.ok()) << links.status();
  ASSERT_GE(links->size(), 2u);
  const testing::Json& last_server = (*links)[links->size() - 2];
  const testing::Json& last_worker = (*links)[links->size() - 1];
  EXPECT_EQ(last_server["host"].string, "server0");
  EXPECT_EQ(last_worker["host"].string, "worker0");
  // One link: sampled together, server 0's counters are worker 0's (the job is over by then).
  EXPECT_EQ(last_server["t"].number, last_worker["t"].number);
  EXPECT_NEAR(last_server["rx_bytes"].number, last_worker["rx_bytes"].number, 65536);
  EXPECT_GT(last_server["rx_bytes"].number, 5 * (1 << 20));  // worker 1's 1 MB pushes came in
  const std::string tag = absl::StrCat("r2sp", run.pid(), "-");
  EXPECT_EQ(Shell("ip netns list").find(tag), std::string::npos) << Shell("ip netns list");
}

// --time_dilation=4: the 100 Mbit/s link given is shaped to 25 Mbit/s (the self-check measures
// that rate and says so), hosts.json records the link as given with its dilation, and the job
// still completes.
TEST(NetclusterTest, DilatedLinkRunsAtItsRateOverTheDilation) {
  SKIP_WITHOUT_NAMESPACES();
  const std::string dir = testing::MakeTempDir("netcluster_dilated");
  testing::ChildProcess run({"/usr/bin/python3", "tools/netcluster", "--bin_dir=.", "--servers=1",
                             "--workers=2", "--server_link=100mbit", "--time_dilation=4",
                             "--self_check", "--quiet", "--run_dir=" + dir + "/run",
                             "--timeout=120", "--worker_flags=--model_mb=1 --iterations=3"},
                            dir + "/netcluster.log");
  const std::optional<int> code = run.Wait(absl::Seconds(180));
  const std::string log = run.Log();
  ASSERT_EQ(code, 0) << log;
  EXPECT_NE(log.find("; time dilated 4x"), std::string::npos) << log;
  EXPECT_NE(log.find(" of 25.0 Mbit/s configured ("), std::string::npos) << log;
  EXPECT_NE(log.find(") (100mbit dilated 4x)"), std::string::npos) << log;
  EXPECT_NEAR(SelfCheckMbit(log), 25.0, 0.15 * 25.0) << log;
  const std::string hosts_text = testing::ReadFile(dir + "/run/hosts.json");
  absl::StatusOr<testing::Json> hosts = testing::ParseJson(hosts_text);
  ASSERT_TRUE(hosts.ok()) << hosts.status() << "\n" << hosts_text;
  EXPECT_EQ((*hosts)["server0"]["link"].string, "100mbit") << hosts_text;
  EXPECT_EQ((*hosts)["server0"]["time_dilation"].number, 4) << hosts_text;
  const std::string summary = testing::ReadFile(dir + "/run/summary.json");
  absl::StatusOr<testing::Json> json = testing::ParseJson(summary);
  ASSERT_TRUE(json.ok()) << json.status() << "\n" << summary;
  EXPECT_EQ((*json)["iterations"].number, 3) << summary;
}

}  // namespace
}  // namespace r2sp
