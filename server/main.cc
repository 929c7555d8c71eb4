// The `server` binary: turns its flags into ServerNodeOptions and runs the server's life in
// the job (server/server_node.h) until the scheduler stops it.
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/cli.h"
#include "common/node_flags.h"
#include "gflags/gflags.h"
#include "server/lr_schedule.h"
#include "server/server_node.h"

DEFINE_double(lr, 0.01, "learning rate");
DEFINE_double(momentum, 0.9, "SGD momentum (0 disables it)");
DEFINE_double(weight_decay, 0.0, "L2 weight decay");
DEFINE_int64(warmup_updates, 0, "linear learning-rate warm-up over this many global-batch steps");
DEFINE_string(lr_milestones, "", "multiply the rate by --lr_gamma after these global-batch step "
              "counts, e.g. 2000,3000 (BSP: a clock is a step; asynchronous modes: a push is b_i/B "
              "of a step, or a whole one with --noper_sample_updates)");
DEFINE_bool(per_sample_updates, true, "asp/ssp/r2sp: apply a push of b_i samples as b_i/B of a "
            "global-batch step (momentum decays per sample), so every mode shares one set of "
            "hyperparameters; false: every push is a whole SGD step (classic ASP)");
DEFINE_double(lr_gamma, 0.1, "learning-rate decay factor at each milestone");

int main(int argc, char** argv) {
  r2sp::InitProcess(&argc, &argv, "R2SP parameter server");
  r2sp::CheckFlag(FLAGS_lr > 0, "--lr must be positive");
  r2sp::CheckFlag(FLAGS_momentum >= 0 && FLAGS_momentum < 1, "--momentum must be in [0, 1)");
  r2sp::CheckFlag(FLAGS_weight_decay >= 0, "--weight_decay must be >= 0");
  r2sp::CheckFlag(FLAGS_warmup_updates >= 0, "--warmup_updates must be >= 0");
  r2sp::CheckFlag(FLAGS_lr_gamma > 0 && FLAGS_lr_gamma <= 1, "--lr_gamma must be in (0, 1]");
  const std::vector<int64_t> milestones =
      r2sp::ValueOrExit(r2sp::ParseMilestones(FLAGS_lr_milestones));

  r2sp::ServerNodeOptions options;
  options.connection = r2sp::ConnectionFromFlags();
  options.server.sgd = {static_cast<float>(FLAGS_lr), static_cast<float>(FLAGS_momentum),
                        static_cast<float>(FLAGS_weight_decay)};
  options.server.schedule.warmup_updates = FLAGS_warmup_updates;
  options.server.schedule.milestones = milestones;
  options.server.schedule.gamma = static_cast<float>(FLAGS_lr_gamma);
  options.server.per_sample_updates = FLAGS_per_sample_updates;
  r2sp::ServerNode node(options);
  const absl::Status status = node.Run();
  if (!status.ok()) r2sp::ExitWithError(status);
  return 0;
}
