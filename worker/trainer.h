// What a worker trains, over its WorkerSession (worker_session.h): the tensors it registers,
// the buffer of their parameters, and rank 0's initial values. The C++ trainers, which run their
// own loop (LoopTrainer: model_trainer.h, synthetic_trainer.h), are run whole by RunWorker;
// the Python client's (script_trainer.h) is driven step by step by the script's thread.
#ifndef R2SP_WORKER_TRAINER_H_
#define R2SP_WORKER_TRAINER_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/messages.pb.h"
#include "worker/loop_options.h"
#include "worker/worker_session.h"

namespace r2sp {

class Trainer {
 public:
  virtual ~Trainer() = default;
  // Loads what it trains (a model and its data set, ...): the tensors the worker registers.
  virtual absl::StatusOr<std::vector<proto::TensorSpec>> Load() = 0;
  // Whether it trains on a shard of a data set (then the scheduler hands out shards).
  virtual bool wants_data_shard() const = 0;
  // The parameters (the tensors' size, after Load): initial values, then each pull's.
  virtual float* params() = 0;
  // Rank 0 of a new job: fills params() with the job's initial values (before they go to the
  // servers). The default leaves them as they are.
  virtual absl::Status InitialParameters() { return absl::OkStatus(); }
};

// A trainer that runs its whole training on the calling thread.
class LoopTrainer : public Trainer {
 public:
  // After the session joined and params() hold the job's initial parameters.
  virtual absl::StatusOr<LoopResult> Train(WorkerSession* session) = 0;
};

// Load, join, the initial parameters: what every trainer's worker does before training.
absl::Status JoinWith(WorkerSession* session, Trainer* trainer);

// A worker's whole life: JoinWith, Train, then finish (or leave); an error says which phase
// failed, or, once the worker was lost to the job, the Aborted error that said why.
absl::Status RunWorker(WorkerSession* session, LoopTrainer* trainer);

}  // namespace r2sp

#endif  // R2SP_WORKER_TRAINER_H_
