// tools/netcluster on this machine: 1 scheduler, 1 server and 2 workers, each in its own network
// namespace, the server's link shaped to 50 Mbit/s. The self-check's measured rate must be
// within 15% of the setting, a short job must complete across the namespaces, and nothing may
// be left behind (namespaces, veths, processes). Needs root; reports itself skipped otherwise.
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

TEST(NetclusterTest, ShapedLinkSelfCheckJobAndTeardown) {
  if (geteuid() != 0) GTEST_SKIP() << "netcluster needs root";
  if (Shell("ip netns list >/dev/null 2>&1 && echo ok").find("ok") == std::string::npos) {
    GTEST_SKIP() << "network namespaces are not available here";
  }
  const std::string dir = testing::MakeTempDir("netcluster");
  testing::ChildProcess run({"/usr/bin/python3", "tools/netcluster", "--bin_dir=.", "--servers=1",
                             "--workers=2", "--server_link=50mbit", "--self_check", "--quiet",
                             "--run_dir=" + dir + "/run", "--timeout=120",
                             "--worker_flags=--model_mb=1 --iterations=5"},
                            dir + "/netcluster.log");
  const std::optional<int> code = run.Wait(absl::Seconds(180));
  const std::string log = run.Log();
  ASSERT_EQ(code, 0) << log;
  const std::string key = "self-check: ";
  const size_t at = log.find(key);
  ASSERT_NE(at, std::string::npos) << log;
  double mbit = 0;
  ASSERT_TRUE(absl::SimpleAtod(log.substr(at + key.size(), log.find(' ', at + key.size()) -
                                                                 at - key.size()),
                               &mbit))
      << log;
  EXPECT_NEAR(mbit, 50.0, 0.15 * 50.0) << log;
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

}  // namespace
}  // namespace r2sp
