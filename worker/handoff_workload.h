// A workload computed by code on another thread: the Python client's (worker/python/), whose
// script runs its own forward and backward. The worker's life (worker_node.h) runs on its own
// thread and this workload hands each phase across:
//   joining: the node registers and initialises; Joined() publishes what the job decided, and
//     the node waits in AwaitStart() until the script says how many samples it trains;
//   training: the training loop asks for a step (ComputeGradient) and waits; the script sees it
//     (Wait -> kStepWanted, step()), computes the gradient into the buffer it shares with this
//     workload, says which parts are final while backward runs (GradientReady), and hands the
//     step over (Submit). After an epoch the evaluating worker's loop asks for the evaluation
//     (EvaluateTest): the script reports one (ReportEvaluation) or moves on (SkipEvaluation);
//   over: the node finished (Finish) or failed (Fail); the script ends the run early (Close).
//     The node's final pull, which writes the parameters, waits for the script's finish()
//     (AllowFinal; AwaitFinal), so what the script reads after training is training's.
// One waiting side at a time: the loop's thread waits while the script computes and the
// script's thread while the loop exchanges, so the buffers need no lock of their own.
//
// Overlapped pulls (the script's opt-in, EnableForwardWaits before Start): the loop may then
// return from a step's exchange with the pull still writing the parameters (Exchanger,
// --overlap with --overlap_pulls), and the script says before its forward reads each part of
// them (ParamsNeeded). A pull can be left running only into a wanted step: the loop finishes
// it when ComputeGradient returns, before EvaluateTest (TrainingLoop::Evaluate) and before the
// run ends, and the exchange before an evaluation or the worker's last step does not leave it
// running. So ParamsNeeded outside a wanted step is a no-op (forward hooks fire in the
// script's evaluations too). Within one, the loop's thread waits for the range, not the
// script's: the Exchanger's pull state is touched by its own thread only, and the script's
// thread waits on this workload's lock, in slices it can interrupt (Ctrl-C during a bsp
// barrier). The cost is a thread handoff per request (about 10 us). GradientReady still calls
// the loop's relay from the script's side, which touches the pushes, not the pull; the Python
// client waits for the whole pull before its first GradientReady of a step anyway.
#ifndef R2SP_WORKER_HANDOFF_WORKLOAD_H_
#define R2SP_WORKER_HANDOFF_WORKLOAD_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/host_gradient.h"
#include "worker/training_loop.h"
#include "worker/workload.h"

namespace r2sp {

// What the job decided for this worker, once it joined.
struct JoinedJob {
  int rank = 0;
  int workers = 0;
  std::string mode;  // bsp, ssp, asp, r2sp, easgd or eawild
  bool hetero_batching = false;
  int data_world = 0;  // the data set's shards
  int data_shard = 0;  // this worker's
  // Whether this worker evaluates now (evaluator_role.h: the lowest live rank). Empty: never.
  std::function<bool()> evaluates;
  int64_t first_step = 0;  // > 0: the job resumed, or this worker joined a running one
  int batch_size = 0;      // until the scheduler says otherwise
  bool overlaps_backward = false;  // GradientReady starts pushes during backward
  // The exchange may leave a step's pull running into the next step (--overlap with
  // --overlap_pulls, the slot not covering the pull: Exchanger::overlaps_pulls()); it does
  // when the script enabled forward waits (HandoffWorkload::EnableForwardWaits).
  bool overlaps_pulls = false;
  // easgd, eawild: the elastic period (0 in other modes), and a pull of the centre into `out`
  // (the model's size, fp32) for a worker that pushed `rounds` rounds (easgd: waits until they
  // are added), from any thread while the node runs; Cancelled once `interrupted` says so, and
  // once the node stopped (PullCentre, elastic_exchange.h).
  int elastic_period = 0;
  std::function<absl::Status(float* out, int64_t rounds, const std::function<bool()>& interrupted)>
      pull_centre;
};

// The step the loop waits for.
struct WantedStep {
  int64_t clock = 0;
  int epoch = 0;           // 0-based
  int64_t index = 0;       // in the epoch, 0-based
  int64_t epoch_steps = 0;  // the run's last epoch: up to its last step (--max_steps)
  int batch = 0;
  std::vector<int> live_shards;  // the shards the epoch trains
};

// Thread-safe: the node's thread calls the Workload side, Joined, AwaitStart, SetEpochPlan,
// Finish and Fail; the script's thread the rest (RequestParams and AwaitParams may come from
// several of the script's threads: autograd's too).
class HandoffWorkload : public Workload {
 public:
  enum class State {
    kJoining,            // the node has not joined yet
    kJoined,             // joined; waiting for Start
    kRunning,            // the loop (or the script) is busy; nothing is wanted
    kStepWanted,         // step() says which
    kEvaluationWanted,   // after an epoch, on the evaluating worker
    kOver,               // finished: result()
  };

  // `fp32` and `fp16`: the gradient buffers (the model's size) the script writes; `fp16` may be
  // null (then Submit refuses fp16).
  HandoffWorkload(const float* fp32, const uint16_t* fp16);

  // --- The node's side.
  void Joined(const JoinedJob& job);
  // Blocks until Start (the training set's size) or Close (its status).
  absl::StatusOr<int64_t> AwaitStart();
  // The epochs' shards: every shard of `world` unless a plan says otherwise (SetEpochPlan).
  // (Each epoch's steps come from the loop: StartEpoch.)
  void SetTraining(int world);
  void SetEpochPlan(int epoch, std::vector<int> live_shards);
  void Finish(const LoopResult& result);
  void Fail(const absl::Status& why);  // the run failed: Wait returns `why` from now on
  // After Finish: waits up to `timeout` for the script's finish() (AllowFinal) or Close, which
  // let the node write the final parameters (its final pull) into the buffer the script may
  // read until then; whether either came.
  bool AwaitFinal(absl::Duration timeout);

  // --- Workload (the training loop, on the node's thread).
  void set_gradient_ready(::r2sp::GradientReady fn) override;
  // Accepted (true) only after EnableForwardWaits; `fn` is then called on the loop's thread,
  // inside ComputeGradient, for the ranges the script asks for (RequestParams).
  bool set_params_needed(::r2sp::ParamsNeeded fn) override;
  void StartEpoch(int epoch, int64_t steps) override;
  void SkipSteps(int64_t steps, int batch) override;
  absl::StatusOr<ComputedStep> ComputeGradient(int64_t clock, int batch,
                                               const float* params) override;
  bool EvaluatesAfterEpoch() const override;
  absl::StatusOr<std::optional<TestEvaluation>> EvaluateTest(const float* params) override;

  // --- The script's side.
  // Waits up to `timeout` while the state is kJoining or kRunning; the state then, or the error
  // the run failed with (Fail), or the Close status after Close.
  absl::StatusOr<State> Wait(absl::Duration timeout);
  JoinedJob joined() const;
  WantedStep step() const;  // REQUIRES: state kStepWanted
  LoopResult result() const;  // REQUIRES: state kOver
  // FailedPrecondition unless joined and not started yet; InvalidArgument for a size < 1.
  absl::Status Start(int64_t train_samples);
  // [offset, offset + count) of this step's gradient is final. FailedPrecondition unless a step
  // is wanted; OutOfRange for a range outside the model (`size`).
  absl::Status GradientReady(int64_t offset, int64_t count, bool fp16, int64_t size);
  // The wanted step's gradient is complete; the loop goes on (state kRunning).
  absl::Status Submit(int samples, double loss, bool fp16);
  // The evaluation the loop waits for; false (nothing recorded) when none is wanted.
  bool ReportEvaluation(const TestEvaluation& evaluation);
  // A wanted evaluation goes unreported; nothing if none is wanted.
  void SkipEvaluation();
  // finish(): the script is done with the parameters training left; the node may write the
  // final ones (AwaitFinal).
  void AllowFinal();

  // --- The script's side: overlapped pulls.
  // The script will call RequestParams before its forward reads each part of the parameters,
  // every step, so the loop may leave pulls running into the next step (whether it does:
  // joined().overlaps_pulls). FailedPrecondition once training started.
  absl::Status EnableForwardWaits();
  bool forward_waits() const;
  // The script is about to read [offset, offset + count) of the parameters: asks the loop to
  // wait for the pull left running to have written them. The request's number for AwaitParams,
  // or 0 when there is nothing to wait for (no step wanted, forward waits not in use, count 0).
  // OutOfRange for a range outside the model (`size`).
  absl::StatusOr<int64_t> RequestParams(int64_t offset, int64_t count, int64_t size);
  // Waits up to `timeout` for request `id`: true once the range is final (or the step it was
  // asked in ended: a submit or Close from another thread), false if still waiting. The run's
  // error (Fail) or the Close status once either came.
  absl::StatusOr<bool> AwaitParams(int64_t id, absl::Duration timeout);
  // RequestParams, then AwaitParams until done.
  absl::Status ParamsNeeded(int64_t offset, int64_t count, int64_t size);

  // The script ends the run: a loop waiting for a step (or an evaluation, or the start) gets
  // `why`; later calls of either side see it. Idempotent (the first status stays).
  void Close(const absl::Status& why);

 private:
  bool Changed() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !(state_ == State::kJoining || state_ == State::kRunning) || !closed_.ok() ||
           !failed_.ok();
  }
  bool FinalAllowed() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return final_allowed_ || !closed_.ok();
  }
  // In ComputeGradient, until the step is submitted or the run closed: waits for the ranges
  // the script requests (RequestParams), one after another, with mu_ released meanwhile.
  void ServeParamRequests() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const float* const fp32_;
  const uint16_t* const fp16_;
  mutable absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kJoining;
  absl::Status closed_ ABSL_GUARDED_BY(mu_);  // Close's
  absl::Status failed_ ABSL_GUARDED_BY(mu_);  // Fail's
  JoinedJob joined_ ABSL_GUARDED_BY(mu_);
  int64_t train_samples_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int> all_shards_ ABSL_GUARDED_BY(mu_);
  std::map<int, std::vector<int>> plans_ ABSL_GUARDED_BY(mu_);  // epoch -> its live shards
  WantedStep step_ ABSL_GUARDED_BY(mu_);  // the current epoch's, then the wanted step
  bool submitted_fp16_ ABSL_GUARDED_BY(mu_) = false;
  int submitted_samples_ ABSL_GUARDED_BY(mu_) = 0;
  double submitted_loss_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<TestEvaluation> evaluation_ ABSL_GUARDED_BY(mu_);
  LoopResult result_ ABSL_GUARDED_BY(mu_);
  bool final_allowed_ ABSL_GUARDED_BY(mu_) = false;  // AllowFinal's
  ::r2sp::GradientReady gradient_ready_ ABSL_GUARDED_BY(mu_);
  // Overlapped pulls: the opt-in, the loop's function, and the ranges asked for and not yet
  // waited for, the first numbered served_ + 1 (requests are served in order).
  bool forward_waits_ ABSL_GUARDED_BY(mu_) = false;
  ::r2sp::ParamsNeeded params_needed_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<int64_t, int64_t>> param_requests_ ABSL_GUARDED_BY(mu_);
  int64_t requested_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t served_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace r2sp

#endif  // R2SP_WORKER_HANDOFF_WORKLOAD_H_
