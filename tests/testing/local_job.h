// A whole R2SP job as child processes on 127.0.0.1 for integration tests: the real scheduler,
// server and worker binaries (from the test's runfiles), each logging to a file in the job's
// directory. Destroying the job kills whatever is still running.
#ifndef R2SP_TESTS_TESTING_LOCAL_JOB_H_
#define R2SP_TESTS_TESTING_LOCAL_JOB_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "tests/testing/child_process.h"

namespace r2sp::testing {

// In flags, "{dir}" becomes the job's directory and "{i}" the worker's start index.
struct JobSpec {
  std::string name;  // names the directory
  int servers = 1;
  int workers = 1;
  std::vector<std::string> scheduler_flags, server_flags, worker_flags;
  std::map<int, std::vector<std::string>> worker_flags_for;  // by start order
  bool trace = false;  // give each worker --metrics and --timeline files in the directory
};

class LocalJob {
 public:
  explicit LocalJob(const JobSpec& spec);

  // Starts one more worker with the spec's flags plus `extra` (e.g. to join a running job);
  // returns its index.
  int StartWorker(const std::vector<std::string>& extra = {});
  // Starts one more server with the spec's flags plus `extra` (e.g. to replace a lost one, at
  // its old --bind); returns its index.
  int StartServer(const std::vector<std::string>& extra = {});

  // Waits for every process; true if all exited with status 0 (failures are test errors
  // with the process's log).
  bool WaitAll(absl::Duration timeout);

  const std::string& dir() const { return dir_; }
  const std::string& endpoint() const { return endpoint_; }  // the scheduler's
  std::string Stats() const;  // the scheduler's stats JSON
  std::string WorkerFile(int i, const std::string& suffix) const;  // e.g. (2, ".jsonl")
  ChildProcess& scheduler() { return *scheduler_; }
  ChildProcess& server(int i) { return *servers_[i]; }
  ChildProcess& worker(int i) { return *workers_[i]; }

 private:
  const JobSpec spec_;
  std::string dir_;
  std::string endpoint_;
  std::unique_ptr<ChildProcess> scheduler_;
  std::vector<std::unique_ptr<ChildProcess>> servers_, workers_;
};

// The largest "test_accuracy" in a stats JSON (the evaluating worker's), or -1.
double ReportedAccuracy(const std::string& stats);

}  // namespace r2sp::testing

#endif  // R2SP_TESTS_TESTING_LOCAL_JOB_H_
