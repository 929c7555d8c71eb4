// The `server` binary: turns its flags into ServerNodeOptions and runs the server's life in
// the job (server/server_node.h) until the scheduler stops it.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/termination_signals.h"
#include "common/cli.h"
#include "common/status_macros.h"
#include "common/node_flags.h"
#include "gflags/gflags.h"
#include "server/apply_threads.h"
#include "server/checkpointer.h"
#include "server/lr_schedule.h"
#include "server/server_node.h"

// The node flags (--scheduler, --bind, --auth, ...) are common/node_flags.cc's.
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
DEFINE_string(apply_threads, "auto", "threads that share a large partition's update and "
              "predicted weights (the results are the same bit for bit): 1 to 64, or auto: 2 "
              "where a partition has 64K elements or more and a core is left beyond the I/O "
              "threads and the request thread, else 1");
DEFINE_double(lr_gamma, 0.1, "learning-rate decay factor at each milestone");
DEFINE_string(checkpoint_dir, "", "write checkpoints of this server's shard to DIR/server<RANK>: "
              "every --checkpoint_every, on SIGTERM or SIGINT, when the scheduler is lost or the "
              "job fails, and at the end (empty: none)");
DEFINE_string(checkpoint_every, "", "periodic checkpoints: <N>s (seconds) or <N>steps "
              "(global-batch steps); empty: only the ones listed under --checkpoint_dir");
DEFINE_int32(checkpoint_keep, 3, "keep this many newest checkpoints, delete older ones");
DEFINE_bool(resume, false, "restore the shard from the newest checkpoint in --checkpoint_dir "
            "that verifies (older ones are tried when a newer one is damaged)");

namespace {

// The flags as ServerNodeOptions (ServerNode::Run validates them).
absl::StatusOr<r2sp::ServerNodeOptions> OptionsFromFlags() {
  r2sp::ServerNodeOptions options;
  R2SP_ASSIGN_OR_RETURN(options.connection, r2sp::ConnectionFromFlags(r2sp::proto::SERVER));
  options.server.sgd = {static_cast<float>(FLAGS_lr), static_cast<float>(FLAGS_momentum),
                        static_cast<float>(FLAGS_weight_decay)};
  options.server.schedule.warmup_updates = FLAGS_warmup_updates;
  R2SP_ASSIGN_OR_RETURN(options.server.schedule.milestones,
                        r2sp::ParseMilestones(FLAGS_lr_milestones));
  options.server.schedule.gamma = static_cast<float>(FLAGS_lr_gamma);
  options.server.per_sample_updates = FLAGS_per_sample_updates;
  R2SP_ASSIGN_OR_RETURN(options.server.apply_threads,
                        r2sp::ParseApplyThreads(FLAGS_apply_threads));
  options.checkpoint.dir = FLAGS_checkpoint_dir;
  options.checkpoint.keep = FLAGS_checkpoint_keep;
  R2SP_RETURN_IF_ERROR(r2sp::ParseCheckpointEvery(FLAGS_checkpoint_every, &options.checkpoint));
  options.resume = FLAGS_resume;
  R2SP_RETURN_IF_ERROR(options.Validate());  // before anything starts
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  r2sp::InitProcess(&argc, &argv, "R2SP parameter server");
  r2sp::ServerNode node(r2sp::ValueOrExit(OptionsFromFlags()));
  // SIGTERM (a spot instance's warning, the launcher stopping the job) and SIGINT: checkpoint,
  // then exit 128 + the signal; before the server serves there is nothing to checkpoint.
  r2sp::HandleTerminationSignals([&node](int signo) {
    const std::string why = absl::StrCat("stopped by signal ", signo);
    if (node.Stop(why, 128 + signo)) return;
    std::fprintf(stderr, "server: error: %s\n", why.c_str());
    r2sp::ExitNow(128 + signo);
  });
  const absl::Status status = node.Run();
  if (status.ok()) return 0;
  if (absl::IsAborted(status)) {  // stopped: a signal, the scheduler lost, the job failed
    std::fprintf(stderr, "server: %s\n", std::string(status.message()).c_str());
    r2sp::ExitNow(node.exit_status());
  }
  r2sp::ExitWithError(status);
}
