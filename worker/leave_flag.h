// A worker's request to leave the job (SIGTERM, a pod's or a Slurm job's preemption), raised
// on the signal thread and read by the training thread after each step (worker_session.h).
#ifndef R2SP_WORKER_LEAVE_FLAG_H_
#define R2SP_WORKER_LEAVE_FLAG_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace r2sp {

// Thread-safe.
class LeaveFlag {
 public:
  // The first request's `why` stands ("asked to leave" for an empty one).
  void Request(const std::string& why) ABSL_LOCKS_EXCLUDED(mu_);
  bool requested() const ABSL_LOCKS_EXCLUDED(mu_);
  // Why it was requested; empty before.
  std::string why() const ABSL_LOCKS_EXCLUDED(mu_);
  // The scheduler acknowledged the leave.
  void SetLeft() ABSL_LOCKS_EXCLUDED(mu_);
  bool left() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  std::string why_ ABSL_GUARDED_BY(mu_);
  bool left_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace r2sp

#endif  // R2SP_WORKER_LEAVE_FLAG_H_
