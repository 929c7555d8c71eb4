// See thread_cpu.h.
#include "tools/bench/thread_cpu.h"

#include <dirent.h>
#include <time.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace r2sp::bench {

std::vector<int> ThreadsNamed(const std::string& prefix) {
  std::vector<int> tids;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return tids;
  while (const dirent* entry = readdir(dir)) {
    const std::string tid = entry->d_name;
    if (tid == "." || tid == "..") continue;
    std::ifstream comm("/proc/self/task/" + tid + "/comm");
    std::string name;
    if (std::getline(comm, name) && name.rfind(prefix, 0) == 0) tids.push_back(std::stoi(tid));
  }
  closedir(dir);
  std::sort(tids.begin(), tids.end());
  return tids;
}

double ThreadCpuSeconds(int tid) {
  // The kernel's clock id for another thread's CPU time (MAKE_THREAD_CPUCLOCK(tid,
  // CPUCLOCK_SCHED)): what pthread_getcpuclockid gives for a thread we have no handle of.
  const clockid_t clock = static_cast<clockid_t>((~static_cast<unsigned>(tid) << 3) | 6);
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0) return 0;
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

std::function<void()> ThreadCpuMeter::Counting(std::function<void()> body) {
  return [this, body = std::move(body)] {
    std::vector<double> before;
    for (int tid : tids_) before.push_back(ThreadCpuSeconds(tid));
    body();
    for (size_t i = 0; i < tids_.size(); ++i) sums_[i] += ThreadCpuSeconds(tids_[i]) - before[i];
    ++calls_;
  };
}

std::vector<double> ThreadCpuMeter::PerCall() const {
  std::vector<double> per_call;
  for (double s : sums_) per_call.push_back(calls_ > 0 ? s / calls_ : 0);
  std::sort(per_call.rbegin(), per_call.rend());
  return per_call;
}

}  // namespace r2sp::bench
