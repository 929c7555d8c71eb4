// The `server` binary: turns its flags into ServerNodeOptions and runs the server's life in
// the job (server/server_node.h) until the scheduler stops it.
#include <cstdint>
#include <vector>

#include <cstdio>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/termination_signals.h"
#include "common/cli.h"
#include "common/node_flags.h"
#include "gflags/gflags.h"
#include "server/checkpointer.h"
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
DEFINE_int32(apply_threads, 1, "threads that share a large partition's update and predicted "
             "weights (1: the request thread alone; the results are the same bit for bit)");
DEFINE_double(lr_gamma, 0.1, "learning-rate decay factor at each milestone");
DEFINE_string(checkpoint_dir, "", "write checkpoints of this server's shard to DIR/server<RANK>: "
              "every --checkpoint_every, on SIGTERM or SIGINT, when the scheduler is lost or the "
              "job fails, and at the end (empty: none)");
DEFINE_string(checkpoint_every, "", "periodic checkpoints: <N>s (seconds) or <N>steps "
              "(global-batch steps); empty: only the ones listed under --checkpoint_dir");
DEFINE_int32(checkpoint_keep, 3, "keep this many newest checkpoints, delete older ones");
DEFINE_bool(resume, false, "restore the shard from the newest checkpoint in --checkpoint_dir "
            "that verifies (older ones are tried when a newer one is damaged)");

int main(int argc, char** argv) {
  r2sp::InitProcess(&argc, &argv, "R2SP parameter server");
  r2sp::CheckFlag(FLAGS_lr > 0, "--lr must be positive");
  r2sp::CheckFlag(FLAGS_momentum >= 0 && FLAGS_momentum < 1, "--momentum must be in [0, 1)");
  r2sp::CheckFlag(FLAGS_weight_decay >= 0, "--weight_decay must be >= 0");
  r2sp::CheckFlag(FLAGS_warmup_updates >= 0, "--warmup_updates must be >= 0");
  r2sp::CheckFlag(FLAGS_lr_gamma > 0 && FLAGS_lr_gamma <= 1, "--lr_gamma must be in (0, 1]");
  r2sp::CheckFlag(FLAGS_apply_threads >= 1 && FLAGS_apply_threads <= 64,
                  "--apply_threads must be in [1, 64]");
  const std::vector<int64_t> milestones =
      r2sp::ValueOrExit(r2sp::ParseMilestones(FLAGS_lr_milestones));

  r2sp::ServerNodeOptions options;
  options.connection = r2sp::ConnectionFromFlags(r2sp::proto::SERVER);
  options.server.sgd = {static_cast<float>(FLAGS_lr), static_cast<float>(FLAGS_momentum),
                        static_cast<float>(FLAGS_weight_decay)};
  options.server.schedule.warmup_updates = FLAGS_warmup_updates;
  options.server.schedule.milestones = milestones;
  options.server.schedule.gamma = static_cast<float>(FLAGS_lr_gamma);
  options.server.per_sample_updates = FLAGS_per_sample_updates;
  options.server.apply_threads = FLAGS_apply_threads;
  r2sp::CheckFlag(FLAGS_checkpoint_keep >= 1, "--checkpoint_keep must be >= 1");
  r2sp::CheckFlag(!FLAGS_resume || !FLAGS_checkpoint_dir.empty(), "--resume needs --checkpoint_dir");
  options.checkpoint.dir = FLAGS_checkpoint_dir;
  options.checkpoint.keep = FLAGS_checkpoint_keep;
  const absl::Status every = r2sp::ParseCheckpointEvery(FLAGS_checkpoint_every, &options.checkpoint);
  if (!every.ok()) r2sp::ExitWithError(every);
  options.resume = FLAGS_resume;
  r2sp::ServerNode node(options);
  // SIGTERM (a spot instance's warning, the launcher stopping the job) and SIGINT: checkpoint,
  // then exit 128 + the signal.
  r2sp::HandleTerminationSignals([&node](int signo) {
    node.Stop(absl::StrCat("stopped by signal ", signo), 128 + signo);
  });
  const absl::Status status = node.Run();
  if (status.ok()) return 0;
  if (absl::IsAborted(status)) {  // stopped: a signal, the scheduler lost, the job failed
    std::fprintf(stderr, "server: %s\n", std::string(status.message()).c_str());
    r2sp::ExitNow(node.exit_status());
  }
  r2sp::ExitWithError(status);
}
