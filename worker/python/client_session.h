// The Python client's worker, without Python (core_module.cc binds it as r2sp._core.Worker):
// a WorkerNode with an ExternalModel, running the worker's whole life (join, initialise,
// the training loop, finish) on a thread of its own, while the script's thread drives its
// HandoffWorkload: join, begin training, take each step the loop wants, report the gradient
// ready part by part, submit it, report evaluations, finish. The buffers (parameters, fp32
// and binary16 gradients) are the session's: the script writes and reads them in place.
//
// Every blocking call takes an Interrupt, asked every 100 ms: when it says to stop (Ctrl-C),
// the session aborts (leaves the job) and the call returns Cancelled.
#ifndef R2SP_WORKER_PYTHON_CLIENT_SESSION_H_
#define R2SP_WORKER_PYTHON_CLIENT_SESSION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "models/host_array.h"
#include "worker/handoff_workload.h"
#include "worker/worker_node.h"

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

// Thread-compatible: one thread (the script's) calls everything but the constructor's work;
// GradientReady and ParamsNeeded may come from autograd's thread while that one waits in
// backward.
class ClientSession {
 public:
  // True: stop waiting (the caller was interrupted).
  using Interrupt = std::function<bool()>;

  // `flags`: the worker binary's ("--scheduler=...", "--batch_size=64", ...); InvalidArgument
  // naming a bad one. `params_staged`: the script computes on its own copy of params() (a
  // CUDA model's), so pulls may land in params() while its backward runs (--early_pulls with
  // --overlap; ExchangerOptions::params_staged). Does not connect.
  static absl::StatusOr<std::unique_ptr<ClientSession>> Create(
      const std::vector<std::string>& flags, ClientModel model, const std::string& model_name,
      bool params_staged = false);
  // Aborts (if still in the job) and waits for the worker's thread.
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

  // Starts the worker: registers, initialises the servers from params() on rank 0, pulls them
  // into params(). FailedPrecondition if called twice.
  absl::Status Join(const Interrupt& interrupt);
  JoinedJob joined() const { return handoff_.joined(); }
  absl::Status BeginTraining(int64_t train_samples) { return handoff_.Start(train_samples); }
  // The step the loop wants (an evaluation it waits for goes unreported); nullopt once training
  // is over.
  absl::StatusOr<std::optional<WantedStep>> NextStep(const Interrupt& interrupt);
  absl::Status GradientReady(int64_t offset, int64_t count, bool fp16) {
    return handoff_.GradientReady(offset, count, fp16, size());
  }
  // The script's forward will say before it reads each part of params() (ParamsNeeded), so a
  // step's pull may run on into the next step. Before BeginTraining (FailedPrecondition after).
  absl::Status EnableForwardWaits() { return handoff_.EnableForwardWaits(); }
  // Whether pulls run on into the next step: forward waits enabled, and the worker joined with
  // --overlap and --overlap_pulls (the r2sp slot not covering the pull).
  bool overlaps_pulls() const {
    return handoff_.forward_waits() && handoff_.joined().overlaps_pulls;
  }
  // Blocks until [offset, offset + count) of params() holds the pull left running (the wait is
  // the loop's, counted as pull time); at once when none can be running (outside a wanted
  // step, without overlapped pulls). OutOfRange for a range outside the model; on an interrupt
  // or the run's error, the session aborts and that is returned (Cancelled, Aborted, ...).
  absl::Status ParamsNeeded(int64_t offset, int64_t count, const Interrupt& interrupt);
  // Hands the step over and waits for the exchange: the pulled parameters are in params() when
  // it returns.
  absl::Status Submit(int samples, double loss, bool fp16, const Interrupt& interrupt);
  // easgd, eawild: pulls the centre (fp32) into centre() for an evaluation, as of this
  // worker's last submitted step (easgd: waits until the rounds it pushed are added).
  // FailedPrecondition in other modes, before joining, after leaving the job, and once the node
  // stopped (training over: Finish pulls the centre into params()); on an interrupt the session
  // aborts and Cancelled is returned.
  absl::Status PullCentre(const Interrupt& interrupt);
  // The last PullCentre's values (the model's size; empty before the first).
  const float* centre() const { return centre_.data(); }
  int64_t centre_size() const { return static_cast<int64_t>(centre_.size()); }
  bool EvaluationDue();
  bool ReportEvaluation(double accuracy, double loss) {
    return handoff_.ReportEvaluation(TestEvaluation{accuracy, loss});
  }
  // After the last step: waits for the worker to finish (final barrier, final pull into
  // params(), FINISH) and returns what the loop did. FailedPrecondition (and the session
  // aborts) when the loop still wants steps.
  absl::StatusOr<LoopResult> Finish(const Interrupt& interrupt);
  // Leaves the job now: the worker's thread stops and is joined. Idempotent.
  void Abort(const std::string& why);

 private:
  ClientSession(WorkerOptions options, ClientModel model);
  // Waits until the handoff's state leaves kJoining/kRunning: the state, or the run's error.
  absl::StatusOr<HandoffWorkload::State> AwaitChange(const Interrupt& interrupt);
  // Waits for the worker's thread to end: Run's status.
  absl::Status AwaitThread(const Interrupt& interrupt);

  WorkerOptions options_;
  const ClientModel model_;
  models::HostArray params_;  // page-aligned: CUDA can pin it
  models::HostArray grads_;
  std::vector<uint16_t, models::PageAlignedAllocator<uint16_t>> grads16_;
  std::vector<float> centre_;  // elastic modes, from the first PullCentre
  int64_t submitted_clock_ = -1;  // the last step Submit handed over (its exchange done)
  HandoffWorkload handoff_;
  std::unique_ptr<WorkerNode> node_;
  std::thread thread_;
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status run_status_ ABSL_GUARDED_BY(mu_);
  bool aborted_ = false;
};

}  // namespace r2sp

#endif  // R2SP_WORKER_PYTHON_CLIENT_SESSION_H_
