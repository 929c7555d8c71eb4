// See termination_signals.h.
#include "common/termination_signals.h"

#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <utility>

#include "glog/logging.h"

namespace r2sp {

void HandleTerminationSignals(std::function<void(int)> on_signal) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &set, nullptr), 0);
  std::thread([set, on_signal = std::move(on_signal)] {
    while (true) {
      int signo = 0;
      if (sigwait(&set, &signo) == 0) on_signal(signo);
    }
  }).detach();
}

void ExitNow(int status) {
  std::fflush(stdout);
  std::fflush(stderr);
  google::FlushLogFiles(google::GLOG_INFO);
  std::_Exit(status);
}

}  // namespace r2sp
