// The end of a worker's training, where the job's membership settles: the final WORKERS barrier
// (every live worker's last push sent; the scheduler declares dead whoever never comes, so past
// it no death before it is still unknown), the scheduler's news asked right after it (so the
// evaluating role has seen every such death: the lowest live rank evaluates the final model
// even when worker 0 died within a heartbeat timeout of the end), and the pull of the final
// parameters.
#ifndef R2SP_WORKER_FINAL_SYNC_H_
#define R2SP_WORKER_FINAL_SYNC_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "common/scheduler_client.h"
#include "proto/messages.pb.h"
#include "worker/evaluator_role.h"
#include "worker/ps_client.h"

namespace r2sp {

// Not thread-safe: the training thread uses it. Borrows `scheduler`, `ps` and `evaluator`,
// which must outlive it.
class FinalSync {
 public:
  FinalSync(SchedulerClient* scheduler, PsClient* ps, EvaluatorRole* evaluator,
            const proto::AddressBook& book);

  // The final barrier, then the scheduler's news into the evaluating role. Once: later calls
  // return the first one's outcome (each worker passes the barrier exactly once).
  absl::Status PassBarrier();
  // The pull that brings the final parameters into `params` after `steps` steps of training
  // (bsp: every clock applied; easgd: every round's centre); a repeat for the same `params` and
  // `steps` after one that succeeded does nothing (they hold them already).
  absl::Status PullFinal(float* params, int64_t steps);
  // Before the run's final evaluation: PassBarrier, and in the modes that evaluate their own
  // parameters (all but the elastic ones, which evaluate the centre), PullFinal.
  absl::Status Settle(float* params, int64_t steps);

 private:
  SchedulerClient* const scheduler_;
  PsClient* const ps_;
  EvaluatorRole* const evaluator_;
  const proto::SyncMode sync_;
  const int elastic_period_;
  std::optional<absl::Status> passed_;
  const float* pulled_into_ = nullptr;  // the last successful PullFinal's
  int64_t pulled_steps_ = -1;
};

}  // namespace r2sp

#endif  // R2SP_WORKER_FINAL_SYNC_H_
