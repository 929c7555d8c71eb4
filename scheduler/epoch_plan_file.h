// The file a job's epoch plans are saved in (--epoch_plans, with --absorb_orphaned_shards), so
// a restarted scheduler deals out the epochs its workers are in as before: a serialized
// proto::EpochPlans, replaced atomically and durably on every change (common/durable_file.h),
// read and written through an Env (common/env.h) so tests can inject faults. A failed save
// leaves the plans saved before it, whole.
#ifndef R2SP_SCHEDULER_EPOCH_PLAN_FILE_H_
#define R2SP_SCHEDULER_EPOCH_PLAN_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/env.h"
#include "proto/messages.pb.h"

namespace r2sp {

// The plans an earlier attempt of the job saved in `path`, checked against `world` (the job's
// initial worker count; EpochPlanBook::Parse): no plans if there is no such file, the Env's
// error if it cannot be read, InvalidArgument naming `path` and what is wrong if the plans are
// not this job's.
absl::StatusOr<proto::EpochPlans> LoadEpochPlanFile(const std::string& path, int world,
                                                    Env* env = Env::Default());

// Saves `plans` in `path`, replacing what was there. On an error (the Env's, naming the file
// and the operation) the file holds the plans saved before.
absl::Status SaveEpochPlanFile(const std::string& path, const proto::EpochPlans& plans,
                               Env* env = Env::Default());

}  // namespace r2sp

#endif  // R2SP_SCHEDULER_EPOCH_PLAN_FILE_H_
