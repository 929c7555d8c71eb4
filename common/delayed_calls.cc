// See delayed_calls.h.
#include "common/delayed_calls.h"

#include <utility>

namespace r2sp {

DelayedCalls::DelayedCalls() : thread_([this] { Loop(); }) {}

DelayedCalls::~DelayedCalls() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void DelayedCalls::After(absl::Duration delay, std::function<void()> call) {
  absl::MutexLock lock(&mu_);
  calls_.emplace(absl::Now() + delay, std::move(call));
  added_ = true;
}

void DelayedCalls::Loop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    const absl::Time due = calls_.empty() ? absl::InfiniteFuture() : calls_.begin()->first;
    if (due > absl::Now()) {
      // Wakes for the stop, for a new call (which may be due sooner), or when the first is due.
      added_ = false;
      mu_.AwaitWithDeadline(absl::Condition(
                                +[](DelayedCalls* d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(d->mu_) {
                                  return d->stopping_ || d->added_;
                                },
                                this),
                            due);
      continue;
    }
    std::function<void()> call = std::move(calls_.begin()->second);
    calls_.erase(calls_.begin());
    mu_.Unlock();
    call();
    mu_.Lock();
  }
}

}  // namespace r2sp
