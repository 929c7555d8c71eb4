// See child_process.h.
#include "tests/testing/child_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace r2sp::testing {

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::string& log_path)
    : log_path_(log_path) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_ = fork();
  if (pid_ == 0) {
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    execv(args[0], args.data());
    _exit(127);
  }
}

ChildProcess::~ChildProcess() {
  if (!status_.has_value() && pid_ > 0) {
    Kill(SIGKILL);
    Wait(absl::Seconds(5));
  }
}

std::optional<int> ChildProcess::Wait(absl::Duration timeout) {
  if (status_.has_value()) return status_;
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int raw = 0;
    const pid_t got = waitpid(pid_, &raw, WNOHANG);
    if (got == pid_) {
      status_ = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
      return status_;
    }
    if (absl::Now() >= deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

void ChildProcess::Kill(int signal) {
  if (pid_ > 0 && !status_.has_value()) kill(pid_, signal);
}

std::string ChildProcess::Log() const { return ReadFile(log_path_); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string WaitForFile(const std::string& path, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    std::string contents = ReadFile(path);
    if (!contents.empty() && contents.back() == '\n') return contents;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return "";
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

std::string MakeTempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(base != nullptr ? base : "/tmp", "/", name, "_", getpid());
  mkdir(dir.c_str(), 0755);
  return dir;
}

}  // namespace r2sp::testing
