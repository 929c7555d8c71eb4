// See range_pool.h.
#include "server/range_pool.h"

#include <algorithm>

#include "glog/logging.h"

namespace r2sp {

RangePool::RangePool(int threads) {
  CHECK_GE(threads, 1);
  for (int i = 1; i < threads; ++i) helpers_.emplace_back([this] { Helper(); });
}

RangePool::~RangePool() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : helpers_) t.join();
}

void RangePool::Work(const Job& job) {
  for (size_t k = next_.fetch_add(1); k < (job.n + job.grain - 1) / job.grain;
       k = next_.fetch_add(1)) {
    (*job.body)(k * job.grain, std::min(job.n, (k + 1) * job.grain));
  }
}

void RangePool::Run(size_t n, size_t grain, const Body& body) {
  CHECK_GE(grain, 1u);
  const Job job{&body, n, grain};
  if (helpers_.empty() || n <= grain) {
    next_ = 0;
    Work(job);
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    job_ = job;
    next_ = 0;
    running_ = static_cast<int>(helpers_.size());
    ++generation_;
  }
  Work(job);
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* running) { return *running == 0; }, &running_));
  job_ = Job();
}

void RangePool::Helper() {
  int64_t seen = 0;
  for (;;) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || generation_ != seen;
      };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    Work(job);
    absl::MutexLock lock(&mu_);
    --running_;
  }
}

}  // namespace r2sp
