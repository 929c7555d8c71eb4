// The one check of an epoch plan's live data shards (proto EpochPlan.live_shards), on both
// sides of the protocol: the scheduler's saved plans (scheduler/epoch_plans.h) and the plans a
// worker receives (common/epoch_samples.h deals the samples out from them).
#ifndef R2SP_COMMON_LIVE_SHARDS_H_
#define R2SP_COMMON_LIVE_SHARDS_H_

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace r2sp {

// OK if `live` is non-empty, ascending, without repeats, each in [0, world); else an error
// saying what is wrong.
absl::Status CheckLiveShards(absl::Span<const int> live, int world);

}  // namespace r2sp

#endif  // R2SP_COMMON_LIVE_SHARDS_H_
