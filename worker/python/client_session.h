// The Python client's worker, without Python (core_module.cc binds it as r2sp._core.Worker):
// the flat buffers the script's model is viewed through (parameters, fp32 and binary16
// gradients), a WorkerSession and the ScriptTrainer over it (script_trainer.h). Every call runs
// on the thread that makes it (the script's): join, begin training, each step, evaluations,
// finish; nothing is handed to another thread.
//
// A blocking call (joining, a step's exchange, the final barrier) can be cut short from another
// thread: Interrupt() (Ctrl-C, seen by the session's watch thread) stops the session's
// communication, the call returns Cancelled("interrupted") and the worker is out of the job.
// The watch thread also stops it when the worker is lost to the job (the heartbeats' verdict),
// so that a call waiting on a job that is gone returns Aborted.
#ifndef R2SP_WORKER_PYTHON_CLIENT_SESSION_H_
#define R2SP_WORKER_PYTHON_CLIENT_SESSION_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/host_array.h"
#include "worker/optimizer_state.h"
#include "worker/python/session_watch.h"
#include "worker/script_trainer.h"
#include "worker/session_option_map.h"
#include "worker/session_options.h"
#include "worker/worker_session.h"

namespace r2sp {

// A tensor of the caller's model: its name and shape.
struct ClientTensor {
  std::string name;
  std::vector<int64_t> shape;
};

// The caller's tensors as the job registers them, with each one's (name, offset, count) in the
// flat buffers and the model's size in floats.
struct ClientModel {
  // InvalidArgument for no tensors, an empty or repeated name, or a dimension < 1.
  static absl::StatusOr<ClientModel> Of(const std::vector<ClientTensor>& tensors);

  std::vector<proto::TensorSpec> specs;
  std::vector<std::tuple<std::string, int64_t, int64_t>> offsets;
  int64_t size = 0;
};

// Thread-compatible: one thread (the script's) calls it; GradientReady and ParamsNeeded may come
// from autograd's thread while that one waits in backward; Interrupt from any thread.
class ClientSession {
 public:
  // `options`: the worker's, by the worker binary's flag names (session_option_map.h: an
  // InvalidArgument names a bad one); `model_name` names the model in the job's reports;
  // `params_staged`: the script computes on its own copy of params() (a CUDA model's), so pulls
  // may land in params() while its backward runs (--early_pulls with --overlap;
  // ExchangerOptions::params_staged). Does not connect.
  static absl::StatusOr<std::unique_ptr<ClientSession>> Create(
      const std::map<std::string, OptionValue>& options, ClientModel model,
      const std::string& model_name, bool params_staged = false);
  // Leaves the job (if still in it) and stops the watch thread.
  ~ClientSession();
  ClientSession(const ClientSession&) = delete;
  ClientSession& operator=(const ClientSession&) = delete;

  int64_t size() const { return model_.size; }
  // (name, offset, count) of each tensor in the flat buffers.
  const std::vector<std::tuple<std::string, int64_t, int64_t>>& offsets() const {
    return model_.offsets;
  }
  // The push codec's canonical name (fp16 gradients go as binary16 only with "fp16").
  std::string push_codec() const;
  float* params() { return params_.data(); }
  float* grads() { return grads_.data(); }
  uint16_t* grads16() { return grads16_.data(); }

  // Starts the watch (signal_fd: the read end of the interpreter's signal wakeup pipe, or -1;
  // each byte read is passed on to forward_fd when >= 0), registers, initialises the servers
  // from params() on rank 0, pulls them into params(). FailedPrecondition if called twice.
  absl::Status Join(int signal_fd = -1, int forward_fd = -1);
  // REQUIRES: joined.
  const JoinedJob& joined() const { return trainer_->job(); }
  bool evaluates() const { return trainer_ != nullptr && trainer_->evaluates(); }
  absl::Status BeginTraining(int64_t train_samples);
  // The step the job wants next (an evaluation due and not reported is passed over); nullopt
  // once training is over.
  absl::StatusOr<std::optional<ScriptStep>> NextStep();
  absl::Status GradientReady(int64_t offset, int64_t count, bool fp16);
  // The script's forward will say before it reads each part of params() (ParamsNeeded), so a
  // step's pull may run on into the next step. Before BeginTraining.
  absl::Status EnableForwardWaits();
  bool overlaps_pulls() const { return trainer_ != nullptr && trainer_->overlaps_pulls(); }
  // Blocks until [offset, offset + count) of params() holds the pull left running (the wait
  // counts as pull time); at once when none can be running. OutOfRange outside the model.
  absl::Status ParamsNeeded(int64_t offset, int64_t count);
  // The step's gradient is complete: its exchange; the pulled parameters are in params() when
  // it returns. `skip`: the step skips its update (an inf or NaN in the gradient): the pushes
  // carry nothing, the pull comes as usual. `began` (> InfinitePast): when the script's compute
  // of the step began, if before NextStep handed it out (ComputedStep::began).
  absl::Status Submit(int samples, double loss, bool fp16, bool skip = false,
                      absl::Time began = absl::InfinitePast());
  // The tensor at [offset, offset + count) gets sparse gradients (an embedding's): its pushes
  // send the non-zero rows (PsClient::PushNonzeroRowsOf). OutOfRange outside the model.
  absl::Status PushNonzeroRowsOf(int64_t offset, int64_t count);
  // The script's optimizer from now on: parameter group g's settings are groups[g], tensor i
  // (in the model's order) is in group tensor_groups[i]; the servers apply it to every push
  // that follows (wire/optimizer_runs.h). InvalidArgument for settings or groups the servers
  // refuse; FailedPrecondition before joining and in easgd and eawild (the script's optimizer
  // takes the local step there; the servers only move the centre).
  absl::Status SetOptimizer(const std::vector<proto::OptimizerSettings>& groups,
                            const std::vector<int>& tensor_groups);
  // easgd, eawild: pulls the centre (fp32) into centre() for an evaluation, as of this worker's
  // last submitted step. FailedPrecondition in other modes, before joining, after leaving the
  // job, and once training finished.
  absl::Status PullCentre();
  // Before joining: the state a new job's rank 0 sends with its parameters (a script's
  // checkpoint; WorkerSession::SetInitialState). FailedPrecondition once joined.
  absl::Status SetInitialState(ScriptOptimizerState state);
  // The servers' optimizer state (optimizer_state.h). FailedPrecondition before joining, in
  // easgd and eawild.
  absl::StatusOr<ScriptOptimizerState> PullOptimizerState();
  // The last PullCentre's values (the model's size; empty before the first).
  const float* centre() const { return centre_.data(); }
  int64_t centre_size() const { return static_cast<int64_t>(centre_.size()); }
  bool EvaluationDue() const { return trainer_ != nullptr && trainer_->EvaluationDue(); }
  bool ReportEvaluation(double accuracy, double loss);
  // After the last step: the final barrier, the final pull into params(), FINISH; what the run
  // did. FailedPrecondition (and the worker leaves the job) when the job still wants steps.
  absl::StatusOr<LoopResult> Finish();
  // What the worker's pushes and pulls sent and received so far (zeros before joining).
  PsClientCounters traffic() const;
  // Leaves the job now (its communication stops; the scheduler counts it dead). Idempotent.
  void Abort(const std::string& why);
  // From any thread: a blocking call returns Cancelled("interrupted"), the worker leaves the job.
  void Interrupt();
  // The thread (pthread_self) that sent the last push (0 before any).
  uint64_t last_push_thread() const;

 private:
  ClientSession(SessionOptions options, ClientModel model);
  // Before a call: the error that ended the session (interrupted, lost, aborted), if any.
  absl::Status Usable() const;
  // Usable(), and FailedPrecondition before joining.
  absl::Status InJob() const;
  // A blocking call's error as the script sees it: Cancelled after an interrupt, the Aborted
  // verdict once lost; the worker then leaves the job.
  absl::Status Ended(const absl::Status& status);

  const SessionOptions options_;
  const ClientModel model_;
  HostArray params_;  // page-aligned: CUDA can pin it
  HostArray grads_;
  std::vector<uint16_t, PageAlignedAllocator<uint16_t>> grads16_;
  std::vector<float> centre_;  // elastic modes, from the first PullCentre
  std::unique_ptr<WorkerSession> session_;
  std::unique_ptr<ScriptTrainer> trainer_;
  std::unique_ptr<SessionWatch> watch_;
  bool forward_waits_ = false;  // asked for before joining
  std::optional<ScriptOptimizerState> initial_state_;  // SetInitialState's, until joining
  std::atomic<bool> interrupted_{false};
  bool aborted_ = false;
  std::string aborted_why_;
};

}  // namespace r2sp

#endif  // R2SP_WORKER_PYTHON_CLIENT_SESSION_H_
