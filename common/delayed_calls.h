// Runs callbacks after a delay, on one thread of its own: what retries with backoff wait on
// without blocking the transport's I/O thread.
#ifndef R2SP_COMMON_DELAYED_CALLS_H_
#define R2SP_COMMON_DELAYED_CALLS_H_

#include <functional>
#include <map>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace r2sp {

// Thread-safe.
class DelayedCalls {
 public:
  DelayedCalls();
  // Joins the thread; calls still waiting are dropped, never run.
  ~DelayedCalls();

  DelayedCalls(const DelayedCalls&) = delete;
  DelayedCalls& operator=(const DelayedCalls&) = delete;

  // Runs `call` once `delay` has passed (calls due at the same time in the order given).
  void After(absl::Duration delay, std::function<void()> call) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  std::multimap<absl::Time, std::function<void()>> calls_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool added_ ABSL_GUARDED_BY(mu_) = false;  // a call came since the thread last looked
  std::thread thread_;
};

}  // namespace r2sp

#endif  // R2SP_COMMON_DELAYED_CALLS_H_
