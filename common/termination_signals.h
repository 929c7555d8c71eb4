// SIGTERM and SIGINT turned into a call on a thread of their own, so that a process can finish
// what it is doing (a server writes a checkpoint: a spot instance's two-minute warning comes as
// SIGTERM) instead of dying inside a signal handler.
#ifndef R2SP_COMMON_TERMINATION_SIGNALS_H_
#define R2SP_COMMON_TERMINATION_SIGNALS_H_

#include <functional>

namespace r2sp {

// Blocks SIGTERM and SIGINT in the calling thread, which every thread started afterwards
// inherits, and starts a detached thread that calls `on_signal(signo)` for each one that
// arrives. REQUIRES: called from main() before any other thread starts; once.
void HandleTerminationSignals(std::function<void(int)> on_signal);

// Flushes stdout, stderr and glog, then ends the process at once with `status` (no static
// destructors, which other threads may still be using).
[[noreturn]] void ExitNow(int status);

}  // namespace r2sp

#endif  // R2SP_COMMON_TERMINATION_SIGNALS_H_
