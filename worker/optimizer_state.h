// A training script's optimizer state on the servers, for the whole model (OPTIMIZER_STATE
// requests, one per partition): pulled for the script's state_dict(), and sent by worker 0 of a
// job that resumes from the script's checkpoint, in place of its initial parameters, so the
// servers go on with the moments, the update count and the job's step where the script stopped.
#ifndef R2SP_WORKER_OPTIMIZER_STATE_H_
#define R2SP_WORKER_OPTIMIZER_STATE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/handler.h"
#include "worker/ps_client.h"

namespace r2sp {

// Flat over the model (the layout's order); an empty moment is none (no partition has one).
struct ScriptOptimizerState {
  std::vector<float> first;   // SGD's momentum buffer, Adam's exp_avg
  std::vector<float> second;  // Adam's exp_avg_sq
  int64_t updates = 0;        // optimizer updates applied (Adam's step), the fewest of any part
  double steps = 0;           // the job's global-batch steps, the fewest of any partition
};

// Every partition's state from its server, as worker `rank`. FailedPrecondition before the
// servers have initial values; InvalidArgument in easgd and eawild; a malformed reply's error.
absl::StatusOr<ScriptOptimizerState> PullOptimizerState(Requester& requester,
                                                        const PsClient& ps, int rank,
                                                        absl::Duration timeout);

// Initialises every partition with its slice of `params` (the model's size) and of `state`
// (moments of the model's size or empty; updates <= steps; the bsp clock is the step).
// InvalidArgument for moments of another size or counters out of range, before anything is
// sent; a server's refusal otherwise.
absl::Status PushInitialState(Requester& requester, const PsClient& ps, int rank,
                              const float* params, const ScriptOptimizerState& state,
                              absl::Duration timeout);

}  // namespace r2sp

#endif  // R2SP_WORKER_OPTIMIZER_STATE_H_
