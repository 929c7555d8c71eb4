// See local_job.h.
#include "tests/testing/local_job.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"

namespace r2sp::testing {

LocalJob::LocalJob(const JobSpec& spec) : spec_(spec), dir_(MakeTempDir(spec.name)) {
  std::vector<std::string> argv = {"scheduler/scheduler",
                                   "--bind=tcp://127.0.0.1:*",
                                   "--endpoint_file=" + dir_ + "/endpoint",
                                   "--stats_json=" + dir_ + "/stats.json",
                                   "--heartbeat_timeout_ms=1000",
                                   absl::StrCat("--num_servers=", spec.servers),
                                   absl::StrCat("--num_workers=", spec.workers)};
  argv.insert(argv.end(), spec.scheduler_flags.begin(), spec.scheduler_flags.end());
  scheduler_ = std::make_unique<ChildProcess>(argv, dir_ + "/scheduler.log");
  endpoint_ = WaitForFile(dir_ + "/endpoint", absl::Seconds(20));
  EXPECT_FALSE(endpoint_.empty()) << scheduler_->Log();
  if (!endpoint_.empty()) endpoint_.pop_back();
  for (int i = 0; i < spec.servers; ++i) StartServer();
  for (int i = 0; i < spec.workers; ++i) StartWorker();
}

int LocalJob::StartServer(const std::vector<std::string>& extra) {
  const int i = static_cast<int>(servers_.size());
  std::vector<std::string> a = {"server/server", "--scheduler=" + endpoint_,
                                "--bind=tcp://127.0.0.1:*", "--heartbeat_ms=200"};
  a.insert(a.end(), spec_.server_flags.begin(), spec_.server_flags.end());
  a.insert(a.end(), extra.begin(), extra.end());
  servers_.push_back(std::make_unique<ChildProcess>(a, absl::StrCat(dir_, "/server", i, ".log")));
  return i;
}

int LocalJob::StartWorker(const std::vector<std::string>& extra) {
  const int i = static_cast<int>(workers_.size());
  std::vector<std::string> a = {"worker/worker", "--scheduler=" + endpoint_,
                                "--bind=tcp://127.0.0.1:*", "--heartbeat_ms=200"};
  if (spec_.trace) {
    a.push_back("--metrics=" + WorkerFile(i, ".jsonl"));
    a.push_back("--timeline=" + WorkerFile(i, ".json"));
  }
  a.insert(a.end(), spec_.worker_flags.begin(), spec_.worker_flags.end());
  auto flags_for = spec_.worker_flags_for.find(i);
  if (flags_for != spec_.worker_flags_for.end()) {
    a.insert(a.end(), flags_for->second.begin(), flags_for->second.end());
  }
  a.insert(a.end(), extra.begin(), extra.end());
  for (std::string& flag : a) {
    flag = absl::StrReplaceAll(flag, {{"{dir}", dir_}, {"{i}", absl::StrCat(i)}});
  }
  workers_.push_back(std::make_unique<ChildProcess>(a, absl::StrCat(dir_, "/worker", i, ".log")));
  return i;
}

std::string LocalJob::WorkerFile(int i, const std::string& suffix) const {
  return absl::StrCat(dir_, "/worker", i, suffix);
}

std::string LocalJob::Stats() const { return ReadFile(dir_ + "/stats.json"); }

bool LocalJob::WaitAll(absl::Duration timeout) {
  bool ok = true;
  for (auto& w : workers_) {
    const std::optional<int> code = w->Wait(timeout);
    EXPECT_EQ(code, 0) << w->Log();
    ok &= code == 0;
  }
  for (auto& s : servers_) {
    const std::optional<int> code = s->Wait(absl::Seconds(30));
    EXPECT_EQ(code, 0) << s->Log();
    ok &= code == 0;
  }
  const std::optional<int> code = scheduler_->Wait(absl::Seconds(30));
  EXPECT_EQ(code, 0) << scheduler_->Log();
  return ok && code == 0;
}

double ReportedAccuracy(const std::string& stats) {
  const std::string key = "\"test_accuracy\": ";
  double best = -1;
  for (size_t at = stats.find(key); at != std::string::npos; at = stats.find(key, at + 1)) {
    const size_t start = at + key.size();
    const size_t end = stats.find_first_of(",}", start);
    double v;
    if (absl::SimpleAtod(stats.substr(start, end - start), &v)) best = std::max(best, v);
  }
  return best;
}

}  // namespace r2sp::testing
