// One iteration's communication in the job's consistency mode, shared by real training and the
// synthetic workload: r2sp: wait for this worker's slot -> push the gradient -> r2sp: release
// the slot (leaving the ring after the last one; with slot_includes_pull only after the pull)
// -> pull the parameters as the mode allows (bsp: the next clock's; ssp: once the slowest live
// worker is within `staleness` clocks).
#ifndef R2SP_WORKER_EXCHANGE_H_
#define R2SP_WORKER_EXCHANGE_H_

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/scheduler_client.h"
#include "worker/ps_client.h"
#include "worker/run_log.h"

namespace r2sp {

struct ExchangeOptions {
  proto::SyncMode sync = proto::ASP;
  int staleness = 0;  // ssp
  // r2sp: release the slot after the pull (the R2SP paper) instead of once the push is
  // acknowledged (the default: the next worker's push then overlaps this one's pull).
  bool slot_includes_pull = false;
  // The previous iteration's IterationMetrics::CommSeconds(), and the iterations left, this
  // one included (0: unknown), reported with the r2sp slot request (hetero batching).
  double previous_comm_seconds = 0;
  int64_t iterations_left = 0;
  // Asynchronous modes: pull the weights the servers predict for when the next gradient lands
  // (PullOptions; r2sp delay compensation), not the current ones. 0 updates: current.
  float predict_fraction = 0.0f;
  int predict_updates = 0;
};

// `m` holds the iteration's clock, batch and compute_seconds (reported with the slot request);
// Exchange fills in its wait, gap, push and pull fields. `computed` is when the compute phase
// ended; `scale` > 0 weights the gradient on the servers; `last` marks the worker's final
// iteration. Adds wait (r2sp), push and pull spans to `log` (may be null). Returns the batch
// size an r2sp slot grant assigned with hetero batching, or 0.
absl::StatusOr<int> Exchange(const ExchangeOptions& options, PsClient* ps,
                             SchedulerClient* scheduler, const float* grads, float* params,
                             float scale, bool last, absl::Time computed, IterationMetrics* m,
                             RunLog* log);

}  // namespace r2sp

#endif  // R2SP_WORKER_EXCHANGE_H_
