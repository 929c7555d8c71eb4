// See epoch_plans.h.
#include "scheduler/epoch_plans.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/live_shards.h"
#include "common/status_macros.h"

namespace r2sp {

EpochPlanBook::EpochPlanBook(int world) { plans_.set_data_world(world); }

absl::StatusOr<proto::EpochPlans> EpochPlanBook::Parse(const std::string& bytes, int world) {
  proto::EpochPlans saved;
  if (!saved.ParseFromString(bytes)) {
    return absl::InvalidArgumentError("not a serialized EpochPlans message");
  }
  if (saved.data_world() != world) {
    return absl::InvalidArgumentError(absl::StrCat("plans for ", saved.data_world(),
                                                   " data shards, the job has ", world));
  }
  if (saved.plans_size() > kMaxEpochs) {
    return absl::InvalidArgumentError(absl::StrCat(saved.plans_size(), " epochs planned"));
  }
  for (int e = 0; e < saved.plans_size(); ++e) {
    const auto& live = saved.plans(e).live_shards();
    R2SP_RETURN_IF_ERROR_WITH(CheckLiveShards(live, world), absl::StrCat("epoch ", e));
  }
  return saved;
}

void EpochPlanBook::Restore(const proto::EpochPlans& saved) {
  plans_ = saved;
  restored_ = saved.plans_size();
  started_ = false;
}

absl::StatusOr<proto::EpochPlan> EpochPlanBook::Plan(int epoch, bool starting,
                                                     std::vector<int> live, bool* fixed) {
  *fixed = false;
  const int planned = plans_.plans_size();
  if (epoch < 0 || epoch > planned || epoch >= kMaxEpochs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "epoch ", epoch, " cannot be planned: ", planned, " are, and only the next may be"));
  }
  if (starting && !started_) {
    // The job (resumed, if plans were restored) starts in `epoch`: what an earlier attempt
    // planned after it is planned again from the workers there are now.
    started_ = true;
    if (restored_ > epoch + 1) {
      plans_.mutable_plans()->DeleteSubrange(epoch + 1, planned - epoch - 1);
      *fixed = true;
    }
  }
  if (epoch == plans_.plans_size()) {
    live.erase(std::remove_if(live.begin(), live.end(),
                              [this](int s) { return s < 0 || s >= plans_.data_world(); }),
               live.end());
    std::sort(live.begin(), live.end());
    live.erase(std::unique(live.begin(), live.end()), live.end());
    if (live.empty()) return absl::FailedPreconditionError("no worker is alive to plan for");
    proto::EpochPlan* plan = plans_.add_plans();
    plan->mutable_live_shards()->Assign(live.begin(), live.end());
    *fixed = true;
  }
  return plans_.plans(epoch);
}

}  // namespace r2sp
