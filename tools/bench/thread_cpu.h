// CPU time of some of this process's threads, found by name: ZeroMQ's I/O threads
// ("ZMQbg/IO/N"), where CURVE seals and opens messages, so that a benchmark can say which
// threads did a measurement's work and how much the busiest did.
#ifndef R2SP_TOOLS_BENCH_THREAD_CPU_H_
#define R2SP_TOOLS_BENCH_THREAD_CPU_H_

#include <functional>
#include <string>
#include <vector>

namespace r2sp::bench {

// The ids of this process's threads whose name (/proc/self/task/*/comm) starts with `prefix`.
std::vector<int> ThreadsNamed(const std::string& prefix);

// CPU seconds thread `tid` of this process has used (its per-thread CPU clock); 0 if it is gone.
double ThreadCpuSeconds(int tid);

// Counts the CPU the watched threads use while wrapped bodies run. Not thread-safe.
class ThreadCpuMeter {
 public:
  explicit ThreadCpuMeter(std::vector<int> tids) : tids_(std::move(tids)), sums_(tids_.size()) {}

  // `body`, adding each watched thread's CPU seconds while it ran. The meter outlives it.
  std::function<void()> Counting(std::function<void()> body);
  // Each watched thread's mean CPU seconds per call, largest first.
  std::vector<double> PerCall() const;

 private:
  std::vector<int> tids_;
  std::vector<double> sums_;
  int calls_ = 0;
};

}  // namespace r2sp::bench

#endif  // R2SP_TOOLS_BENCH_THREAD_CPU_H_
