// See signal_pipe.h.
#include "worker/python/signal_pipe.h"

#include <fcntl.h>
#include <pybind11/pybind11.h>
#include <unistd.h>

namespace py = pybind11;

namespace r2sp {
namespace {

// signal.set_wakeup_fd(fd, warn_on_full_buffer=False): the fd it replaced.
int SetWakeupFd(int fd) {
  return py::cast<int>(py::module_::import("signal").attr("set_wakeup_fd")(
      fd, py::arg("warn_on_full_buffer") = false));
}

}  // namespace

SignalPipe::~SignalPipe() {
  Restore();
  if (read_fd_ >= 0) close(read_fd_);
}

bool SignalPipe::Install() {
  if (installed_ || read_fd_ >= 0) return installed_;
  const py::object threading = py::module_::import("threading");
  if (!threading.attr("current_thread")().is(threading.attr("main_thread")())) return false;
  int fds[2];
  if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) return false;
  try {
    previous_fd_ = SetWakeupFd(fds[1]);
  } catch (const py::error_already_set&) {
    close(fds[0]);
    close(fds[1]);
    return false;  // e.g. a sub-interpreter: no wakeup fd there
  }
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  installed_ = true;
  return true;
}

void SignalPipe::Restore() {
  if (!installed_) return;
  installed_ = false;
  try {
    const int replaced = SetWakeupFd(previous_fd_);
    if (replaced != write_fd_) SetWakeupFd(replaced);  // someone else's since: theirs stays
  } catch (const py::error_already_set&) {
    // At interpreter shutdown the signal module may be gone: nothing to restore then.
  }
  close(write_fd_);
  write_fd_ = -1;
}

}  // namespace r2sp
