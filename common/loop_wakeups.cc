// See loop_wakeups.h.
#include "common/loop_wakeups.h"

#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace r2sp {

absl::StatusOr<std::unique_ptr<LoopWakeups>> LoopWakeups::Create() {
  const int event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event_fd < 0) return absl::InternalError(absl::StrCat("eventfd: ", strerror(errno)));
  const int timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (timer_fd < 0) {
    const int error = errno;
    close(event_fd);
    return absl::InternalError(absl::StrCat("timerfd_create: ", strerror(error)));
  }
  return std::unique_ptr<LoopWakeups>(new LoopWakeups(event_fd, timer_fd));
}

LoopWakeups::~LoopWakeups() {
  close(event_fd_);
  close(timer_fd_);
}

void LoopWakeups::Wake() {
  const uint64_t one = 1;
  (void)!write(event_fd_, &one, sizeof(one));
}

void LoopWakeups::ArmTimer(absl::Duration wait) {
  const int64_t ns = std::max<int64_t>(1, absl::ToInt64Nanoseconds(wait));  // 0 would disarm
  itimerspec spec{};
  spec.it_value.tv_sec = static_cast<time_t>(ns / 1000000000);
  spec.it_value.tv_nsec = static_cast<long>(ns % 1000000000);
  if (timerfd_settime(timer_fd_, 0, &spec, nullptr) != 0) {
    LOG(ERROR) << "timerfd_settime: " << strerror(errno);
  }
}

void LoopWakeups::ClearEvent() {
  uint64_t value;
  (void)!read(event_fd_, &value, sizeof(value));
}

void LoopWakeups::ClearTimer() {
  uint64_t expirations;
  (void)!read(timer_fd_, &expirations, sizeof(expirations));
}

}  // namespace r2sp
