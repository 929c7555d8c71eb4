// See epoch_planner.h.
#include "worker/epoch_planner.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/live_shards.h"
#include "common/status_macros.h"
#include "common/epoch_samples.h"

namespace r2sp {

std::function<absl::StatusOr<int64_t>(int, bool)> MakeEpochPlanner(
    const EpochPlannerOptions& options, SchedulerClient* scheduler, Exchanger* exchanger,
    EpochPlanUser use_plan) {
  return [options, scheduler, exchanger, use_plan = std::move(use_plan)](
             int epoch, bool starting) -> absl::StatusOr<int64_t> {
    R2SP_ASSIGN_OR_RETURN(const std::vector<int> live,
                          WithContext(scheduler->EpochPlan(epoch, starting),
                                      absl::StrCat("asking for the plan of epoch ", epoch + 1)));
    R2SP_RETURN_IF_ERROR_WITH(CheckLiveShards(live, options.world),
                              absl::StrCat("the scheduler's plan of epoch ", epoch + 1));
    const bool counted = std::find(live.begin(), live.end(), options.shard) != live.end();
    exchanger->SetLiveWorkers(static_cast<int>(live.size()));
    const int dead = options.world - static_cast<int>(live.size());
    if (dead > 0) {
      std::printf("worker %d: epoch %d also trains a share of the data of %d dead worker%s\n",
                  options.rank, epoch + 1, dead, dead == 1 ? "" : "s");
    }
    // With tuned batches an epoch stays the data set in global batches; with fixed ones, the
    // smallest load in fixed batches (every worker runs as many, so that clocks line up).
    const int64_t steps =
        options.batch <= 0
            ? options.fixed_steps
            : std::max<int64_t>(1, FewestEpochSamples(options.train_samples,
                                                              options.world, live) /
                                       options.batch);
    use_plan(epoch, live, counted, steps);
    return steps;
  };
}

}  // namespace r2sp
