// The learning-rate multiplier as a function of the updates a partition has had: linear
// warm-up from 1/warmup_updates to 1 over the first warmup_updates, then step decay by `gamma`
// at each milestone. The server multiplies its base rate (--lr) by it. Updates count global-batch
// steps: in BSP a clock is one; in the asynchronous modes a push of b_i samples is b_i / B of one
// (--per_sample_updates, the default), or a whole one without it.
// ScheduledSgd applies it to the optimizer options of a partition that has had so many steps.
#ifndef R2SP_SERVER_LR_SCHEDULE_H_
#define R2SP_SERVER_LR_SCHEDULE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/sgd.h"

namespace r2sp {

struct LrSchedule {
  int64_t warmup_updates = 0;
  std::vector<int64_t> milestones;  // ascending update counts
  float gamma = 0.1f;

  // The multiplier for the update that follows `updates_done` earlier ones.
  float Factor(int64_t updates_done) const;
};

// `base` with its learning rate scaled for the update that follows `steps` global-batch steps
// (fractions round down, with a little slack for the sum of b_i / B fractions).
SgdOptions ScheduledSgd(const SgdOptions& base, const LrSchedule& schedule, double steps);

// Parses "N1,N2,..." (ascending positive integers; empty = none).
absl::StatusOr<std::vector<int64_t>> ParseMilestones(const std::string& text);

}  // namespace r2sp

#endif  // R2SP_SERVER_LR_SCHEDULE_H_
