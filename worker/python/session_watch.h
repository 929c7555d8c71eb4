// The Python client's watch thread: it cuts the session's blocking calls short from outside
// the script's thread. A SIGINT (Ctrl-C) the interpreter's signal handler writes to its wakeup
// pipe (signal.set_wakeup_fd: one byte, the signal's number) runs `interrupt`; a loss to the
// job, noted from the heartbeat thread (NoteLost), runs `lost` here, off the heartbeat thread,
// which the session's stop joins. Every byte read is passed on to the wakeup fd the script had
// before, if any.
#ifndef R2SP_WORKER_PYTHON_SESSION_WATCH_H_
#define R2SP_WORKER_PYTHON_SESSION_WATCH_H_

#include <functional>
#include <memory>
#include <thread>

#include "absl/status/statusor.h"

namespace r2sp {

class SessionWatch {
 public:
  struct Actions {
    std::function<void()> interrupt;  // a SIGINT arrived
    std::function<void()> lost;       // NoteLost was called
  };

  // Watches `signal_fd` (a non-blocking read end; -1: no signals) until destroyed, passing each
  // byte on to `forward_fd` (-1: none). Internal for an eventfd that cannot be made.
  static absl::StatusOr<std::unique_ptr<SessionWatch>> Start(int signal_fd, int forward_fd,
                                                             Actions actions);
  // Stops the thread and joins it; the fds stay open (the caller's).
  ~SessionWatch();
  SessionWatch(const SessionWatch&) = delete;
  SessionWatch& operator=(const SessionWatch&) = delete;

  // From any thread: runs actions.lost on the watch's thread, once.
  void NoteLost();

 private:
  SessionWatch(int signal_fd, int forward_fd, int event_fd, Actions actions);
  void Run();
  // The signal bytes waiting in signal_fd_: passed on; true if a SIGINT was among them.
  bool DrainSignals();

  const int signal_fd_;
  const int forward_fd_;
  const int event_fd_;  // eventfd: 1 = lost, 2 = stop (added up: bits)
  const Actions actions_;
  std::thread thread_;
};

}  // namespace r2sp

#endif  // R2SP_WORKER_PYTHON_SESSION_WATCH_H_
