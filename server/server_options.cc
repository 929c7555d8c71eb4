// See server_options.h.
#include "server/server_options.h"

#include "absl/strings/str_join.h"
#include "common/option_checker.h"

namespace r2sp {

absl::Status ServerOptions::Validate() const {
  OptionChecker c("ServerOptions");
  c.Check(sgd.learning_rate > 0, "--lr", "sgd.learning_rate", "> 0", sgd.learning_rate);
  c.Check(sgd.momentum >= 0 && sgd.momentum < 1, "--momentum", "sgd.momentum", "in [0, 1)",
          sgd.momentum);
  c.Check(sgd.weight_decay >= 0, "--weight_decay", "sgd.weight_decay", ">= 0",
          sgd.weight_decay);
  c.Check(elastic_period >= 1, "--elastic_period", "elastic_period", ">= 1 (the address book's)",
          elastic_period);
  c.Check(schedule.warmup_updates >= 0, "--warmup_updates", "schedule.warmup_updates", ">= 0",
          schedule.warmup_updates);
  c.Check(schedule.gamma > 0 && schedule.gamma <= 1, "--lr_gamma", "schedule.gamma",
          "in (0, 1]", schedule.gamma);
  bool ascending = true;
  for (size_t i = 0; i < schedule.milestones.size(); ++i) {
    if (schedule.milestones[i] <= (i == 0 ? 0 : schedule.milestones[i - 1])) ascending = false;
  }
  c.Check(ascending, "--lr_milestones", "schedule.milestones", "positive and ascending",
          absl::StrJoin(schedule.milestones, ","));
  c.Check(apply_threads == kAutoApplyThreads || (apply_threads >= 1 && apply_threads <= 64),
          "--apply_threads", "apply_threads", "auto (0) or in [1, 64]", apply_threads);
  return c.status();
}

}  // namespace r2sp
