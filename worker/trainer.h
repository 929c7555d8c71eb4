// The worker's training loop through the parameter servers, in every consistency mode:
//   compute (forward/backward on a batch of the worker's shard)
//   -> r2sp: wait for the scheduler's slot grant
//   -> push the gradient, weighted b_i / B (bsp: only with heterogeneity-aware batching)
//   -> pull the parameters (bsp: of the next clock; ssp: once the slowest live worker is within
//      `staleness` clocks; asp, r2sp: the current ones)
//   -> r2sp: release the slot; hetero batching: report samples and compute time, adopt the
//      batch size the scheduler answers with from the next iteration; r2sp with lookahead:
//      the pull asks the servers for the parameters predicted for when the next gradient
//      lands (delay compensation, docs/MODES.md).
// Worker 0 evaluates the test set after each epoch. Every iteration is recorded in a RunLog.
#ifndef R2SP_WORKER_TRAINER_H_
#define R2SP_WORKER_TRAINER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/scheduler_client.h"
#include "models/data/batcher.h"
#include "models/data/dataset.h"
#include "models/network.h"
#include "worker/exchange.h"
#include "worker/ps_client.h"
#include "worker/run_log.h"

namespace r2sp {

struct TrainerOptions {
  int rank = 0;
  int epochs = 1;
  int batch_size = 64;  // fixed batch; with hetero batching the first one
  // Steps per epoch, the same on every worker so that clocks line up: the smallest shard's
  // whole batches (fixed batches), or data set size / global batch (hetero batching).
  int64_t steps_per_epoch = 1;
  int64_t max_steps = 0;  // stop after this many steps in all (0: no limit)
  // The job's mode (sync, staleness, slot coverage); Train fills in the per-iteration fields.
  ExchangeOptions mode;
  bool hetero_batching = false;
  int global_batch = 0;   // B: the samples of one step of all workers (b_i / B weights pushes)
  // Emulation of a slower machine: the compute phase is stretched to this many times its
  // length (by sleeping after it). 1 = off.
  double compute_slowdown = 1.0;
  // Emulation of an accelerator: the compute phase lasts at least this many milliseconds per
  // sample of the batch (by sleeping after the real forward/backward). 0 = off.
  double emulate_ms_per_sample = 0.0;
  // r2sp: compute each gradient where the servers predict the parameters to be when it lands,
  // after the other `workers - 1` pushes (PullOptions::predict_*).
  bool lookahead = false;
  int workers = 1;
  bool evaluate = false;  // evaluate the test set after every epoch
  int eval_batch = 1000;
  int log_every = 50;     // progress line every this many steps (0: never)
};

struct TrainResult {
  int64_t steps = 0;
  int64_t samples = 0;
  int epochs = 0;
  double seconds = 0;          // wall time of the loop
  double compute_seconds = 0;  // compute phases (with any emulated slowdown)
  double wait_seconds = 0;     // slot waits and parked pulls
  double comm_seconds = 0;     // push + pull (including parked time)
  double last_epoch_loss = 0;  // mean over the last epoch's steps
  double test_accuracy = -1;   // after the last epoch, if evaluated
  int final_batch = 0;
};

// Borrowed pointers outlive the call; `scheduler` is used in r2sp and with hetero batching,
// `log` may be null.
absl::StatusOr<TrainResult> Train(const TrainerOptions& options, models::Network* net,
                                  PsClient* ps, SchedulerClient* scheduler,
                                  models::Batcher* batcher, const models::Dataset* test,
                                  std::vector<float>* params, RunLog* log);

// Accuracy and mean loss of `params` on all of `data`.
absl::StatusOr<models::EvalResult> EvaluateAll(models::Network* net, const models::Dataset& data,
                                               const float* params, int eval_batch);

}  // namespace r2sp

#endif  // R2SP_WORKER_TRAINER_H_
