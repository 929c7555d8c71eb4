// Runs one element-wise job over a range on several threads. The server's optimizer update and
// its predicted weights are one pass each over a partition, which a server's one request
// thread otherwise does alone (r2sp on an H200 machine was bound by the servers' CPU:
// docs/BENCHMARKS.md#gpu). The calling thread takes part; Run returns
// when every piece is done.
#ifndef R2SP_SERVER_RANGE_POOL_H_
#define R2SP_SERVER_RANGE_POOL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace r2sp {

class RangePool {
 public:
  using Body = std::function<void(size_t begin, size_t end)>;

  // `threads` in all, the caller of Run included (1: Run calls the body itself). REQUIRES: >= 1.
  explicit RangePool(int threads);
  ~RangePool();
  RangePool(const RangePool&) = delete;
  RangePool& operator=(const RangePool&) = delete;

  // Calls body(begin, end) for the pieces [k * grain, min(n, (k + 1) * grain)) of [0, n), each
  // once, spread over the threads. One Run at a time (not reentrant). REQUIRES: grain >= 1.
  void Run(size_t n, size_t grain, const Body& body);
  int threads() const { return static_cast<int>(helpers_.size()) + 1; }

 private:
  struct Job {
    const Body* body = nullptr;
    size_t n = 0;
    size_t grain = 1;
  };
  // Takes pieces of `job` until none is left.
  void Work(const Job& job);
  void Helper();

  absl::Mutex mu_;
  Job job_ ABSL_GUARDED_BY(mu_);
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int running_ ABSL_GUARDED_BY(mu_) = 0;  // helpers not yet done with this generation
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<size_t> next_{0};  // the next piece to take
  std::vector<std::thread> helpers_;
};

}  // namespace r2sp

#endif  // R2SP_SERVER_RANGE_POOL_H_
