// The interpreter's signal wakeup pipe for the Python client's session watch
// (session_watch.h): while installed, Python's C-level signal handler writes each signal's
// number to this pipe (signal.set_wakeup_fd), which the watch reads; the wakeup fd the script
// had before is passed the same bytes and is restored on Restore(). Installed only from the
// main thread (the one Python runs signal handlers on); elsewhere it stays uninstalled and
// Ctrl-C reaches a waiting call only through the main thread's KeyboardInterrupt.
#ifndef R2SP_WORKER_PYTHON_SIGNAL_PIPE_H_
#define R2SP_WORKER_PYTHON_SIGNAL_PIPE_H_

namespace r2sp {

// REQUIRES: the GIL is held for every call.
class SignalPipe {
 public:
  SignalPipe() = default;
  ~SignalPipe();  // Restore() and close
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  // Creates the pipe and installs its write end as the wakeup fd; false (nothing installed)
  // off the main thread or when the pipe cannot be made.
  bool Install();
  // Puts the script's wakeup fd back (unless someone replaced ours meanwhile) and closes the
  // write end, so the watch sees the pipe close. Idempotent.
  void Restore();
  // The read end for the watch (-1 when not installed), and the fd bytes go on to (-1: none).
  int read_fd() const { return read_fd_; }
  int previous_fd() const { return previous_fd_; }

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
  int previous_fd_ = -1;
  bool installed_ = false;
};

}  // namespace r2sp

#endif  // R2SP_WORKER_PYTHON_SIGNAL_PIPE_H_
