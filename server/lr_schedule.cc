// See lr_schedule.h.
#include "server/lr_schedule.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace r2sp {

float LrSchedule::Factor(int64_t updates_done) const {
  float lr = 1.0f;
  if (warmup_updates > 0 && updates_done < warmup_updates) {
    lr = static_cast<float>(updates_done + 1) / static_cast<float>(warmup_updates);
  }
  for (int64_t m : milestones) {
    if (updates_done >= m) lr *= gamma;
  }
  return lr;
}

absl::StatusOr<std::vector<int64_t>> ParseMilestones(const std::string& text) {
  std::vector<int64_t> out;
  if (text.empty()) return out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t v;
    if (!absl::SimpleAtoi(part, &v) || v <= 0 || (!out.empty() && v <= out.back())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "milestones must be ascending positive integers separated by commas, got '", text, "'"));
    }
    out.push_back(v);
  }
  return out;
}

SgdOptions ScheduledSgd(const SgdOptions& base, const LrSchedule& schedule, double steps) {
  SgdOptions sgd = base;
  sgd.learning_rate *= schedule.Factor(static_cast<int64_t>(steps + 1e-6));
  return sgd;
}

}  // namespace r2sp
