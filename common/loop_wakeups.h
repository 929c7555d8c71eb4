// What wakes a transport's I/O thread besides its sockets: an eventfd that other threads write
// (Wake: a message queued, a peer to reset, Stop) and a timerfd that fires at the next tick or
// the handler's next wake-up with nanosecond precision. zmq_poll's own timeout counts whole
// milliseconds, and rounding it up made every wake-up, an r2sp slot grant among them, up to 2 ms
// late (docs/BENCHMARKS.md#many-workers-on-one-scheduler).
#ifndef R2SP_COMMON_LOOP_WAKEUPS_H_
#define R2SP_COMMON_LOOP_WAKEUPS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace r2sp {

// Thread-safety: Wake from any thread; the rest from the I/O thread.
class LoopWakeups {
 public:
  static absl::StatusOr<std::unique_ptr<LoopWakeups>> Create();
  ~LoopWakeups();
  LoopWakeups(const LoopWakeups&) = delete;
  LoopWakeups& operator=(const LoopWakeups&) = delete;

  // The file descriptors to poll (readable once woken, or once the timer fired).
  int event_fd() const { return event_fd_; }
  int timer_fd() const { return timer_fd_; }

  void Wake();
  // The timer fires once, after `wait` (at once if not positive), replacing any earlier arming.
  void ArmTimer(absl::Duration wait);
  // After a poll saw the descriptor readable: reads it, so that it is not readable again until
  // the next Wake or expiry.
  void ClearEvent();
  void ClearTimer();

 private:
  LoopWakeups(int event_fd, int timer_fd) : event_fd_(event_fd), timer_fd_(timer_fd) {}
  const int event_fd_;
  const int timer_fd_;
};

}  // namespace r2sp

#endif  // R2SP_COMMON_LOOP_WAKEUPS_H_
