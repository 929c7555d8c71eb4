// The worker's training loop through the parameter servers: for each step, a batch of its
// shard -> forward/backward on the device -> push the gradient -> pull fresh parameters
// (BSP: the parameters of the next clock). Worker 0 evaluates the test set after each epoch.
#ifndef R2SP_WORKER_TRAINER_H_
#define R2SP_WORKER_TRAINER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "models/data/batcher.h"
#include "models/data/dataset.h"
#include "models/network.h"
#include "worker/ps_client.h"

namespace r2sp {

struct TrainerOptions {
  int rank = 0;
  int epochs = 1;
  int batch_size = 64;
  // Steps per epoch, the same on every worker (BSP needs equal clocks): the smallest shard's
  // whole batches.
  int64_t steps_per_epoch = 1;
  int64_t max_steps = 0;  // stop after this many steps in all (0: no limit)
  bool bsp = false;
  bool evaluate = false;  // evaluate the test set after every epoch
  int eval_batch = 1000;
  int log_every = 50;     // progress line every this many steps (0: never)
};

struct TrainResult {
  int64_t steps = 0;
  int64_t samples = 0;
  int epochs = 0;
  double seconds = 0;          // wall time of the loop
  double compute_seconds = 0;  // forward/backward only
  double comm_seconds = 0;     // push + pull
  double last_epoch_loss = 0;  // mean over the last epoch's steps
  double test_accuracy = -1;   // after the last epoch, if evaluated
};

// Borrowed pointers outlive the call.
absl::StatusOr<TrainResult> Train(const TrainerOptions& options, models::Network* net,
                                  PsClient* ps, models::Batcher* batcher,
                                  const models::Dataset* test, std::vector<float>* params);

// Accuracy and mean loss of `params` on all of `data`.
absl::StatusOr<models::EvalResult> EvaluateAll(models::Network* net, const models::Dataset& data,
                                               const float* params, int eval_batch);

}  // namespace r2sp

#endif  // R2SP_WORKER_TRAINER_H_
