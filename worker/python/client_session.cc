// See client_session.h.
#include "worker/python/client_session.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/codec/codec_spec.h"
#include "common/status_macros.h"
#include "common/sync_modes.h"
#include "common/wire/optimizer_runs.h"

namespace r2sp {

absl::StatusOr<ClientModel> ClientModel::Of(const std::vector<ClientTensor>& tensors) {
  if (tensors.empty()) return absl::InvalidArgumentError("the model has no tensors");
  ClientModel model;
  absl::flat_hash_set<std::string> names;
  for (const ClientTensor& t : tensors) {
    if (t.name.empty()) return absl::InvalidArgumentError("a tensor has an empty name");
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", t.name, "' is named twice"));
    }
    int64_t count = 1;
    for (const int64_t d : t.shape) {
      if (d < 1 || count > (int64_t{1} << 40) / d) {
        return absl::InvalidArgumentError(absl::StrCat(
            "tensor '", t.name, "' has a dimension of ", d, " (each must be >= 1, and a tensor "
            "under 2^40 values)"));
      }
      count *= d;
    }
    proto::TensorSpec spec;
    spec.set_name(t.name);
    spec.set_num_elements(static_cast<uint64_t>(count));
    model.specs.push_back(spec);
    model.offsets.emplace_back(t.name, model.size, count);
    model.size += count;
  }
  return model;
}

absl::StatusOr<std::unique_ptr<ClientSession>> ClientSession::Create(
    const std::map<std::string, OptionValue>& options, ClientModel model,
    const std::string& model_name, bool params_staged) {
  SessionOptions base;
  base.external_model = true;
  base.model = model_name;
  base.exchange.params_staged = params_staged;
  R2SP_ASSIGN_OR_RETURN(SessionOptions session, SessionOptionsFromMap(options, base));
  return absl::WrapUnique(new ClientSession(std::move(session), std::move(model)));
}

ClientSession::ClientSession(SessionOptions options, ClientModel model)
    : options_(std::move(options)),
      model_(std::move(model)),
      params_(model_.size, 0.0f),
      grads_(model_.size, 0.0f),
      grads16_(model_.size, 0) {}

ClientSession::~ClientSession() {
  Abort("the worker was destroyed");
  watch_.reset();  // before the session its actions reach
}

std::string ClientSession::push_codec() const {
  return codec::CodecSpecName(options_.ps.push_codec);
}

absl::Status ClientSession::Usable() const {
  if (interrupted_) return absl::CancelledError("interrupted");
  if (session_ != nullptr) R2SP_RETURN_IF_ERROR(session_->lost());
  if (aborted_) {
    return absl::FailedPreconditionError(
        absl::StrCat("the worker left the job (", aborted_why_, ")"));
  }
  return absl::OkStatus();
}

absl::Status ClientSession::InJob() const {
  if (trainer_ == nullptr) {
    return absl::FailedPreconditionError("the worker has not joined the job");
  }
  return Usable();
}

absl::Status ClientSession::Ended(const absl::Status& status) {
  if (status.ok()) return status;
  absl::Status why = interrupted_ ? absl::CancelledError("interrupted") : status;
  if (!interrupted_ && session_ != nullptr) why = session_->Failed(status);
  Abort(std::string(why.message()));
  return why;
}

absl::Status ClientSession::Join(int signal_fd, int forward_fd) {
  if (session_ != nullptr) return absl::FailedPreconditionError("the worker has joined already");
  // Lost to the job: the watch stops the session (off the heartbeat thread), so that a call
  // waiting on the job returns; Usable() then says why.
  session_ = std::make_unique<WorkerSession>(
      options_, [this](const absl::Status&) { watch_->NoteLost(); });
  R2SP_ASSIGN_OR_RETURN(
      watch_, SessionWatch::Start(signal_fd, forward_fd,
                                  {[this] { Interrupt(); }, [this] { session_->Cancel(); }}));
  if (initial_state_) session_->SetInitialState(std::move(*initial_state_));
  trainer_ = std::make_unique<ScriptTrainer>(session_.get(), model_.specs, params_.data());
  if (forward_waits_) R2SP_RETURN_IF_ERROR(trainer_->EnableForwardWaits());
  return Ended(trainer_->Join());
}

absl::Status ClientSession::BeginTraining(int64_t train_samples) {
  if (trainer_ == nullptr) {
    return absl::FailedPreconditionError("training starts after the worker joined the job");
  }
  R2SP_RETURN_IF_ERROR(Usable());
  return trainer_->Begin(train_samples);
}

absl::Status ClientSession::EnableForwardWaits() {
  if (trainer_ == nullptr) {
    forward_waits_ = true;  // the trainer gets it as it joins
    return absl::OkStatus();
  }
  return trainer_->EnableForwardWaits();
}

absl::StatusOr<std::optional<ScriptStep>> ClientSession::NextStep() {
  R2SP_RETURN_IF_ERROR(InJob());
  absl::StatusOr<std::optional<ScriptStep>> step = trainer_->NextStep();
  if (!step.ok() && !absl::IsFailedPrecondition(step.status())) return Ended(step.status());
  return step;
}

absl::Status ClientSession::GradientReady(int64_t offset, int64_t count, bool fp16) {
  R2SP_RETURN_IF_ERROR(InJob());
  return trainer_->GradientReady(fp16 ? HostGradient::Fp16(grads16_.data())
                                      : HostGradient(grads_.data()),
                                 offset, count);
}

absl::Status ClientSession::PushNonzeroRowsOf(int64_t offset, int64_t count) {
  R2SP_RETURN_IF_ERROR(InJob());
  if (offset < 0 || count <= 0 || offset + count > size()) {
    return absl::OutOfRangeError(absl::StrCat("sparse rows' range [", offset, ", ",
                                              offset + count, ") is outside the model's ",
                                              size(), " values"));
  }
  session_->ps()->PushNonzeroRowsOf(offset, count);
  return absl::OkStatus();
}

absl::Status ClientSession::SetOptimizer(const std::vector<proto::OptimizerSettings>& groups,
                                         const std::vector<int>& tensor_groups) {
  R2SP_RETURN_IF_ERROR(InJob());
  const std::string& mode = trainer_->job().mode;
  if (mode == "easgd" || mode == "eawild") {
    return absl::FailedPreconditionError(absl::StrCat(
        "in ", mode, " the script's optimizer takes each worker's local step; the servers move "
        "only the centre"));
  }
  R2SP_ASSIGN_OR_RETURN(std::vector<proto::PartitionOptimizer> runs,
                        wire::EncodeOptimizerRuns(session_->ps()->layout(), tensor_groups, groups));
  session_->ps()->SetOptimizer(std::move(runs));
  return absl::OkStatus();
}

absl::Status ClientSession::ParamsNeeded(int64_t offset, int64_t count) {
  if (trainer_ == nullptr) return absl::OkStatus();  // nothing can be running
  R2SP_RETURN_IF_ERROR(Usable());
  const absl::Status status = trainer_->ParamsNeeded(offset, count);
  if (absl::IsOutOfRange(status)) return status;
  // The pull's own error surfaces at the step's submit; an interrupt or a loss here.
  return Ended(Usable());
}

absl::Status ClientSession::Submit(int samples, double loss, bool fp16, bool skip,
                                  absl::Time began) {
  R2SP_RETURN_IF_ERROR(InJob());
  ComputedStep step;
  step.samples = samples;
  step.loss = loss;
  step.skip = skip;
  step.began = began;
  step.grads = fp16 ? HostGradient::Fp16(grads16_.data()) : HostGradient(grads_.data());
  const absl::Status status = trainer_->Submit(step);
  if (absl::IsFailedPrecondition(status) || absl::IsInvalidArgument(status)) return status;
  return Ended(status);
}

absl::Status ClientSession::PullCentre() {
  R2SP_RETURN_IF_ERROR(InJob());
  centre_.resize(model_.size);
  const absl::Status status =
      trainer_->PullCentre(centre_.data(), [this] { return interrupted_.load(); });
  if (status.ok() || absl::IsFailedPrecondition(status)) return status;
  return Ended(status);
}

absl::Status ClientSession::SetInitialState(ScriptOptimizerState state) {
  if (session_ != nullptr) {
    return absl::FailedPreconditionError(
        "the optimizer state to start from is set before joining the job");
  }
  initial_state_ = std::move(state);
  return absl::OkStatus();
}

absl::StatusOr<ScriptOptimizerState> ClientSession::PullOptimizerState() {
  R2SP_RETURN_IF_ERROR(InJob());
  if (Elastic(session_->book().sync())) {
    return absl::FailedPreconditionError(
        "easgd and eawild keep no optimizer state on the servers (the script's optimizer "
        "takes the local step)");
  }
  absl::StatusOr<ScriptOptimizerState> state = session_->PullOptimizerState();
  if (state.ok() || absl::IsFailedPrecondition(state.status())) return state;
  return Ended(state.status());
}

bool ClientSession::ReportEvaluation(double accuracy, double loss) {
  return trainer_ != nullptr && trainer_->ReportEvaluation(TestEvaluation{accuracy, loss});
}

absl::StatusOr<LoopResult> ClientSession::Finish() {
  R2SP_RETURN_IF_ERROR(InJob());
  absl::StatusOr<LoopResult> result = trainer_->Finish();
  if (result.ok()) return result;
  if (absl::IsFailedPrecondition(result.status())) {
    Abort(std::string(result.status().message()));  // a worker that cannot finish leaves
    return result.status();
  }
  return Ended(result.status());
}

PsClientCounters ClientSession::traffic() const {
  if (session_ == nullptr || session_->ps() == nullptr) return PsClientCounters{};
  return session_->ps()->counters();
}

void ClientSession::Abort(const std::string& why) {
  if (aborted_) return;
  aborted_ = true;
  aborted_why_ = why;
  if (session_ != nullptr) session_->Cancel();
}

void ClientSession::Interrupt() {
  interrupted_ = true;
  if (session_ != nullptr) session_->Cancel();
}

uint64_t ClientSession::last_push_thread() const {
  return session_ != nullptr && session_->ps() != nullptr ? session_->ps()->last_push_thread() : 0;
}

}  // namespace r2sp
