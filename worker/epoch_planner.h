// LoopOptions::plan_epoch for a job whose survivors take over dead workers' data (the
// scheduler's --absorb_orphaned_shards, proto EpochPlan): before each epoch it asks the
// scheduler for the epoch's live shards, checks them, tells the exchanger how many workers train
// it, and hands the plan to the workload's data (a Batcher's samples, or the Python client's
// sampler through its ScriptTrainer).
#ifndef R2SP_WORKER_EPOCH_PLANNER_H_
#define R2SP_WORKER_EPOCH_PLANNER_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/scheduler_client.h"
#include "worker/exchanger.h"

namespace r2sp {

struct EpochPlannerOptions {
  int rank = 0;  // for the progress line
  int world = 1;  // the data set's shards
  int shard = 0;  // this worker's
  // Fixed batches: an epoch's steps are the fewest samples a live shard trains, in batches of
  // `batch`. 0 (tuned batches): every epoch has `fixed_steps`.
  int batch = 0;
  int64_t fixed_steps = 1;
  int64_t train_samples = 0;  // the training set's size
};

// Each epoch's plan: its number, its live shards, whether this worker's shard is among them
// (one the plan did not count, of a resumed job, trains its own as often as the counted ones'
// steps take), and its steps.
using EpochPlanUser =
    std::function<void(int epoch, const std::vector<int>& live, bool counted, int64_t steps)>;

// The plan_epoch function: returns each epoch's steps. `scheduler` and `exchanger` must outlive
// it.
std::function<absl::StatusOr<int64_t>(int, bool)> MakeEpochPlanner(
    const EpochPlannerOptions& options, SchedulerClient* scheduler, Exchanger* exchanger,
    EpochPlanUser use_plan);

}  // namespace r2sp

#endif  // R2SP_WORKER_EPOCH_PLANNER_H_
