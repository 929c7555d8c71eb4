// Runs a binary as a child process with its output in a log file, for multi-process tests.
// The destructor kills a child that is still running, so a failing test leaves nothing behind.
#ifndef R2SP_TESTS_TESTING_CHILD_PROCESS_H_
#define R2SP_TESTS_TESTING_CHILD_PROCESS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace r2sp::testing {

class ChildProcess {
 public:
  // Starts argv[0] (a path) with its stdout and stderr appended to `log_path`.
  ChildProcess(const std::vector<std::string>& argv, const std::string& log_path);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // The exit status (128 + signal if killed), or nullopt if still running after `timeout`.
  std::optional<int> Wait(absl::Duration timeout);
  void Kill(int signal);
  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }
  std::string Log() const;

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::string log_path_;
};

// Reads a whole file ("" if missing).
std::string ReadFile(const std::string& path);
// Waits until `path` exists and is non-empty; its contents, or "" after `timeout`.
std::string WaitForFile(const std::string& path, absl::Duration timeout);
// A TCP port on 127.0.0.1 that was free a moment ago.
int FreePort();
// A fresh directory under $TEST_TMPDIR (or /tmp).
std::string MakeTempDir(const std::string& name);

}  // namespace r2sp::testing

#endif  // R2SP_TESTS_TESTING_CHILD_PROCESS_H_
