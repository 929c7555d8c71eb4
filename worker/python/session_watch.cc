// See session_watch.h.
#include "worker/python/session_watch.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace r2sp {
namespace {

constexpr uint64_t kLost = 1;
constexpr uint64_t kStop = 1 << 20;  // far above any count of NoteLost calls

void Add(int event_fd, uint64_t value) {
  while (write(event_fd, &value, sizeof(value)) < 0 && errno == EINTR) {
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<SessionWatch>> SessionWatch::Start(int signal_fd, int forward_fd,
                                                                  Actions actions) {
  const int event_fd = eventfd(0, EFD_CLOEXEC);
  if (event_fd < 0) {
    return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
  }
  std::unique_ptr<SessionWatch> watch(
      new SessionWatch(signal_fd, forward_fd, event_fd, std::move(actions)));
  watch->thread_ = std::thread([w = watch.get()] { w->Run(); });
  return watch;
}

SessionWatch::SessionWatch(int signal_fd, int forward_fd, int event_fd, Actions actions)
    : signal_fd_(signal_fd),
      forward_fd_(forward_fd),
      event_fd_(event_fd),
      actions_(std::move(actions)) {}

SessionWatch::~SessionWatch() {
  Add(event_fd_, kStop);
  if (thread_.joinable()) thread_.join();
  close(event_fd_);
}

void SessionWatch::NoteLost() { Add(event_fd_, kLost); }

bool SessionWatch::DrainSignals() {
  bool sigint = false;
  unsigned char bytes[64];
  while (true) {
    const ssize_t n = read(signal_fd_, bytes, sizeof(bytes));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return sigint;
    for (ssize_t i = 0; i < n; ++i) sigint = sigint || bytes[i] == SIGINT;
    if (forward_fd_ >= 0) write(forward_fd_, bytes, static_cast<size_t>(n));
  }
}

void SessionWatch::Run() {
  bool lost_noted = false;
  nfds_t watched = signal_fd_ >= 0 ? 2 : 1;
  while (true) {
    pollfd fds[2] = {{event_fd_, POLLIN, 0}, {signal_fd_, POLLIN, 0}};
    const int ready = poll(fds, watched, -1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return;
    if (watched == 2 && (fds[1].revents & POLLIN) != 0 && DrainSignals()) {
      if (actions_.interrupt) actions_.interrupt();
    }
    // The pipe's write end closed, or the fd is bad: no more signals come through it.
    if (watched == 2 && (fds[1].revents & (POLLHUP | POLLERR | POLLNVAL)) != 0) watched = 1;
    if ((fds[0].revents & POLLIN) == 0) continue;
    uint64_t events = 0;
    if (read(event_fd_, &events, sizeof(events)) != sizeof(events)) continue;
    if (events % kStop != 0 && !lost_noted) {
      lost_noted = true;
      if (actions_.lost) actions_.lost();
    }
    if (events >= kStop) return;
  }
}

}  // namespace r2sp
