// Which worker evaluates the model and writes the model files: the lowest-ranked worker still
// alive. Worker 0 evaluates from the start; when the scheduler's heartbeats declare it dead,
// the next rank takes over from its next evaluation on, and so on down the ranks. Declared
// death is final (the scheduler stops a node it declared dead), so two live workers never both
// evaluate; a finished worker keeps its role (its last evaluation was the model it finished).
#ifndef R2SP_WORKER_EVALUATOR_ROLE_H_
#define R2SP_WORKER_EVALUATOR_ROLE_H_

#include <set>

#include "absl/synchronization/mutex.h"
#include "proto/messages.pb.h"

namespace r2sp {

// Thread-safe: the heartbeat thread reports, the training thread asks.
class EvaluatorRole {
 public:
  explicit EvaluatorRole(int rank) : rank_(rank) {}

  // The scheduler's news: every worker it declared dead so far.
  void OnHeartbeat(const proto::HeartbeatReply& beat) ABSL_LOCKS_EXCLUDED(mu_);

  // Whether this worker evaluates now: every rank below its own is dead.
  bool Evaluates() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const int rank_;
  mutable absl::Mutex mu_;
  std::set<int> dead_ ABSL_GUARDED_BY(mu_);  // ranks below rank_ declared dead
  bool announced_ ABSL_GUARDED_BY(mu_) = false;  // the takeover was logged
};

}  // namespace r2sp

#endif  // R2SP_WORKER_EVALUATOR_ROLE_H_
