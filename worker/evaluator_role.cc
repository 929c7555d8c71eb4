// The evaluating worker: the lowest live rank (evaluator_role.h).
#include "worker/evaluator_role.h"

#include <cstdio>

namespace r2sp {

void EvaluatorRole::OnHeartbeat(const proto::HeartbeatReply& beat) {
  absl::MutexLock lock(&mu_);
  for (const int rank : beat.dead_workers()) {
    if (rank >= 0 && rank < rank_) dead_.insert(rank);
  }
  if (!announced_ && rank_ > 0 && static_cast<int>(dead_.size()) == rank_) {
    announced_ = true;
    std::printf("worker %d: every lower rank is dead: this worker evaluates and writes the "
                "model files from its next evaluation on\n", rank_);
    std::fflush(stdout);
  }
}

bool EvaluatorRole::Evaluates() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(dead_.size()) == rank_;
}

}  // namespace r2sp
