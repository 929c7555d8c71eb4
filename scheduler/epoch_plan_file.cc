// See epoch_plan_file.h.
#include "scheduler/epoch_plan_file.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/durable_file.h"
#include "scheduler/epoch_plans.h"

namespace r2sp {

absl::StatusOr<proto::EpochPlans> LoadEpochPlanFile(const std::string& path, int world, Env* env) {
  absl::StatusOr<std::string> bytes = env->ReadFile(path);
  if (absl::IsNotFound(bytes.status())) return proto::EpochPlans();
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<proto::EpochPlans> plans = EpochPlanBook::Parse(*bytes, world);
  if (!plans.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", plans.status().message()));
  }
  return plans;
}

absl::Status SaveEpochPlanFile(const std::string& path, const proto::EpochPlans& plans, Env* env) {
  return WriteFileAtomically(path, plans.SerializeAsString(), env);
}

}  // namespace r2sp
