// The `worker` binary: turns flags (worker_flags.h) into WorkerOptions and runs the worker's
// life in the job (worker_session.h) with its trainer (trainer.h): a real model on a real data
// set (model_trainer.h), or the synthetic model for transport tests and benchmarks
// (synthetic_trainer.h), or several synthetic workers as threads (--workers_per_process); SIGTERM
// makes a worker leave the job cleanly. Or, with --eval_only, evaluate a model file.
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/cli.h"
#include "common/status_macros.h"
#include "common/termination_signals.h"
#include "gflags/gflags.h"
#include "models/backend.h"
#include "worker/eval_only.h"
#include "worker/model_trainer.h"
#include "worker/synthetic_trainer.h"
#include "worker/worker_flags.h"
#include "worker/worker_session.h"
#include "worker/worker_threads.h"

namespace {

// --print_codec: TEXT's canonical form as a worker reads --push_codec, or why it refuses it.
absl::Status PrintCodec() {
  r2sp::WorkerOptions o;
  R2SP_ASSIGN_OR_RETURN(o.ps.push_codec,
                        r2sp::codec::ParseCodecSpec("push_codec", FLAGS_print_codec));
  R2SP_RETURN_IF_ERROR(o.Validate());
  std::printf("%s\n", r2sp::codec::CodecSpecName(o.ps.push_codec).c_str());
  return absl::OkStatus();
}

// --eval_only: the model file's accuracy now, beside the one training reported for it.
absl::Status EvaluateOnly() {
  r2sp::EvalOnlyOptions o;
  if (!absl::StartsWith(FLAGS_init, "checkpoint:") || FLAGS_init.size() <= 11) {
    return absl::InvalidArgumentError(
        "--eval_only needs --init=checkpoint:PATH (the model file to evaluate)");
  }
  o.model_path = FLAGS_init.substr(11);
  o.data = FLAGS_data;
  o.data_dir = FLAGS_data_dir;
  o.backend.device = FLAGS_device;
  o.backend.threads = FLAGS_threads;
  o.backend.gpu = FLAGS_gpu;
  R2SP_ASSIGN_OR_RETURN(const r2sp::EvalOnlyResult r, r2sp::EvaluateModelFile(o));
  for (const std::string& why : r.skipped) std::printf("worker: passed over %s\n", why.c_str());
  std::printf("worker: %s (%s, step %lld): test accuracy %.4f (loss %.4f)", r.path.c_str(),
              r.model.c_str(), static_cast<long long>(r.step), r.accuracy, r.loss);
  if (r.reported_accuracy >= 0) std::printf("; training reported %.4f", r.reported_accuracy);
  std::printf("\n");
  return absl::OkStatus();
}

// SIGTERM, SIGINT (a pod's or a Slurm job's preemption, a spot warning): the worker leaves the
// job after its current step (WorkerSession::RequestLeave), and exits with 128 + the signal. One
// that does not get there within kLeaveWait (it waits at a barrier, say), or a signal again
// later than kRepeatWindow after the first, ends it at once: the scheduler then notices the
// death by its heartbeat timeout. (One stop often arrives twice at once: a process group's
// signal, and the same passed on by a wrapper such as run_role.)
constexpr absl::Duration kLeaveWait = absl::Seconds(20);
constexpr absl::Duration kRepeatWindow = absl::Seconds(1);

void HandleLeaveSignals(r2sp::WorkerSession* session, std::atomic<int>* signalled) {
  auto on_signal = [session, signalled, first = absl::InfinitePast()](int signo) mutable {
    if (signalled->exchange(signo) != 0) {
      if (absl::Now() - first > kRepeatWindow) r2sp::ExitNow(128 + signo);
      return;
    }
    first = absl::Now();
    std::fprintf(stderr, "worker: signal %d: leaving the job after this step\n", signo);
    session->RequestLeave(absl::StrCat("signal ", signo));
    std::thread([signo] {
      absl::SleepFor(kLeaveWait);
      std::fprintf(stderr, "worker: did not leave within %s: exiting\n",
                   absl::FormatDuration(kLeaveWait).c_str());
      r2sp::ExitNow(128 + signo);
    }).detach();
  };
  r2sp::HandleTerminationSignals(on_signal);
}

}  // namespace

int main(int argc, char** argv) {
  r2sp::InitProcess(&argc, &argv, "R2SP worker");
  if (!FLAGS_print_codec.empty()) {
    const absl::Status printed = PrintCodec();
    if (!printed.ok()) r2sp::ExitWithError(printed);
    return 0;
  }
  if (FLAGS_eval_only) {
    const absl::Status evaluated = EvaluateOnly();
    if (!evaluated.ok()) r2sp::ExitWithError(evaluated);
    return 0;
  }
  // Lost to the job (the scheduler lost, declared dead, the job failed): nothing this worker
  // does counts any more, so it stops at once with status 3.
  const r2sp::WorkerSession::LostHandler on_lost = [](const absl::Status& lost) {
    std::fprintf(stderr, "worker: error: %s\n", std::string(lost.message()).c_str());
    r2sp::ExitNow(3);
  };
  r2sp::WorkerOptions options = r2sp::ValueOrExit(r2sp::WorkerOptionsFromFlags());
  if (options.workers_per_process > 1) {
    // Synthetic workers as threads (scale tests and benchmarks): a signal ends them all.
    const absl::Status status = r2sp::RunWorkerThreads(options, on_lost);
    if (!status.ok()) r2sp::ExitWithError(status);
    return 0;
  }
  std::unique_ptr<r2sp::LoopTrainer> trainer;
  if (options.is_synthetic()) {
    trainer = std::make_unique<r2sp::SyntheticTrainer>(options);
  } else {
    trainer = std::make_unique<r2sp::ModelTrainer>(options);
  }
  r2sp::WorkerSession session(options, on_lost);
  std::atomic<int> signalled{0};
  HandleLeaveSignals(&session, &signalled);
  const absl::Status status = r2sp::RunWorker(&session, trainer.get());
  if (!status.ok()) r2sp::ExitWithError(status);
  // Left on a signal: the status of a process that signal ended, so supervisors see a death.
  if (session.left()) r2sp::ExitNow(128 + signalled.load());
  return 0;
}
