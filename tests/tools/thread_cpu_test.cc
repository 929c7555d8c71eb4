// The benchmarks' per-thread CPU accounting (tools/bench/thread_cpu.h): a thread is found by
// its name, its CPU clock advances while it spins and not while it sleeps, and the meter
// charges each watched thread only for what it did while the wrapped body ran.
#include "tools/bench/thread_cpu.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace r2sp::bench {
namespace {

// Spins while `spin` is set, else sleeps, until `stop`.
void Worker(const char* name, std::atomic<bool>* spin, std::atomic<bool>* stop) {
  pthread_setname_np(pthread_self(), name);
  while (!stop->load()) {
    if (!spin->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

TEST(ThreadCpuTest, FindsThreadsByNameAndChargesThemWhatTheyRan) {
  std::atomic<bool> spin{false}, stop{false};
  std::thread worker(Worker, "cpu_test_spin", &spin, &stop);
  std::vector<int> tids;
  for (int tries = 0; tries < 1000 && tids.empty(); ++tries) {
    tids = ThreadsNamed("cpu_test_");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(tids.size(), 1u);
  EXPECT_TRUE(ThreadsNamed("no_such_thread").empty());
  ThreadCpuMeter meter(tids);
  const auto busy = meter.Counting([&] {
    const double start = ThreadCpuSeconds(tids[0]);
    spin = true;
    // Until it has spun for 50 ms of CPU, however loaded the machine is (10 s at most).
    for (int i = 0; i < 10000 && ThreadCpuSeconds(tids[0]) - start < 0.05; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    spin = false;
  });
  const auto idle = [] { std::this_thread::sleep_for(std::chrono::milliseconds(200)); };
  const auto start = std::chrono::steady_clock::now();
  busy();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double after_busy = meter.PerCall()[0];
  EXPECT_GE(after_busy, 0.05);  // charged what it spun
  EXPECT_LE(after_busy, wall + 0.001);  // one thread runs no faster than the clock on the wall
  idle();  // not wrapped: not charged
  const double before = ThreadCpuSeconds(tids[0]);
  meter.Counting(idle)();
  EXPECT_LT(ThreadCpuSeconds(tids[0]) - before, 0.02);  // asleep
  EXPECT_NEAR(meter.PerCall()[0], after_busy / 2, 0.01);  // two calls, one busy
  stop = true;
  worker.join();
  // join returns once the thread has cleared its id, a moment before the kernel drops its clock.
  double gone = ThreadCpuSeconds(tids[0]);
  for (int tries = 0; tries < 2000 && gone != 0; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    gone = ThreadCpuSeconds(tids[0]);
  }
  EXPECT_EQ(gone, 0);
}

}  // namespace
}  // namespace r2sp::bench
