// See client_session.h.
#include "worker/python/client_session.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/codec/codec_spec.h"
#include "common/status_macros.h"
#include "gflags/gflags.h"
#include "worker/worker_flags.h"

namespace r2sp {
namespace {

constexpr absl::Duration kPoll = absl::Milliseconds(100);

}  // namespace

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
    const std::vector<std::string>& flags, ClientModel model, const std::string& model_name,
    bool params_staged) {
  WorkerOptions options;
  {
    gflags::FlagSaver restore;  // the process's flags stay as they were
    R2SP_RETURN_IF_ERROR(SetWorkerFlags(flags));
    R2SP_ASSIGN_OR_RETURN(options, ParseWorkerFlags());  // validated below
  }
  options.external_model = true;
  options.model = model_name;
  options.init_model_path.clear();  // the script's parameters start the job
  options.exchange.params_staged = params_staged;
  R2SP_RETURN_IF_ERROR(options.Validate());
  return absl::WrapUnique(new ClientSession(std::move(options), std::move(model)));
}

ClientSession::ClientSession(WorkerOptions options, ClientModel model)
    : options_(std::move(options)),
      model_(std::move(model)),
      params_(model_.size, 0.0f),
      grads_(model_.size, 0.0f),
      grads16_(model_.size, 0),
      handoff_(grads_.data(), grads16_.data()) {}

std::string ClientSession::push_codec() const {
  return codec::CodecSpecName(options_.ps.push_codec);
}

ClientSession::~ClientSession() { Abort("the worker was destroyed"); }

absl::Status ClientSession::Join(const Interrupt& interrupt) {
  if (node_ != nullptr) return absl::FailedPreconditionError("the worker has joined already");
  ExternalModel model{model_.specs, params_.data(), &handoff_};
  // Lost to the job: the script's next wait raises it (Aborted), and the session aborts then.
  node_ = std::make_unique<WorkerNode>(
      options_, [this](const absl::Status& lost) { handoff_.Fail(lost); }, model);
  thread_ = std::thread([this] {
    const absl::Status status = node_->Run();
    if (!status.ok()) handoff_.Fail(status);
    absl::MutexLock lock(&mu_);
    done_ = true;
    run_status_ = status;
  });
  R2SP_ASSIGN_OR_RETURN(const HandoffWorkload::State state, AwaitChange(interrupt));
  if (state != HandoffWorkload::State::kJoined) {
    return absl::InternalError("the worker's run went on without joining");
  }
  return absl::OkStatus();
}

absl::StatusOr<HandoffWorkload::State> ClientSession::AwaitChange(const Interrupt& interrupt) {
  if (node_ == nullptr) return absl::FailedPreconditionError("the worker has not joined the job");
  while (true) {
    const absl::StatusOr<HandoffWorkload::State> state = handoff_.Wait(kPoll);
    if (!state.ok()) {
      Abort(std::string(state.status().message()));
      return state.status();
    }
    if (*state != HandoffWorkload::State::kJoining && *state != HandoffWorkload::State::kRunning) {
      return *state;
    }
    if (interrupt && interrupt()) {
      Abort("interrupted");
      return absl::CancelledError("interrupted");
    }
  }
}

absl::StatusOr<std::optional<WantedStep>> ClientSession::NextStep(const Interrupt& interrupt) {
  while (true) {
    R2SP_ASSIGN_OR_RETURN(const HandoffWorkload::State state, AwaitChange(interrupt));
    switch (state) {
      case HandoffWorkload::State::kStepWanted:
        return handoff_.step();
      case HandoffWorkload::State::kEvaluationWanted:
        handoff_.SkipEvaluation();
        continue;
      case HandoffWorkload::State::kOver:
        return std::nullopt;
      default:
        return absl::FailedPreconditionError(
            "training has not begun (begin_training, or iterate r2sp.torch.DistributedSampler)");
    }
  }
}

absl::Status ClientSession::Submit(int samples, double loss, bool fp16,
                                   const Interrupt& interrupt) {
  R2SP_ASSIGN_OR_RETURN(const HandoffWorkload::State state, AwaitChange(interrupt));
  if (state == HandoffWorkload::State::kEvaluationWanted) {
    return absl::FailedPreconditionError("the job waits for an evaluation, not a step "
                                         "(take the next step with next_step first)");
  }
  const int64_t clock = handoff_.step().clock;
  R2SP_RETURN_IF_ERROR(handoff_.Submit(samples, loss, fp16));
  R2SP_RETURN_IF_ERROR(AwaitChange(interrupt).status());
  submitted_clock_ = clock;
  return absl::OkStatus();
}

absl::Status ClientSession::PullCentre(const Interrupt& interrupt) {
  if (node_ == nullptr) return absl::FailedPreconditionError("the worker has not joined the job");
  if (aborted_) return absl::FailedPreconditionError("the worker left the job (aborted)");
  const JoinedJob job = handoff_.joined();
  if (!job.pull_centre || job.elastic_period < 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the job's mode is ", job.mode, ": only easgd and eawild have a centre (in the other "
        "modes the model's parameters are the servers' already)"));
  }
  centre_.resize(model_.size);
  const int64_t steps = submitted_clock_ >= 0 ? submitted_clock_ + 1 : job.first_step;
  bool interrupted = false;
  const absl::Status status =
      job.pull_centre(centre_.data(), steps / job.elastic_period,
                      [&] { return interrupted = interrupt && interrupt(); });
  if (status.ok()) return status;
  if (interrupted) {
    Abort("interrupted");
    return absl::CancelledError("interrupted");
  }
  const absl::StatusOr<HandoffWorkload::State> state = handoff_.Wait(absl::ZeroDuration());
  if (state.ok() && *state == HandoffWorkload::State::kOver) {
    return absl::FailedPreconditionError(
        "training is over and the worker has left the job: its final pull brought the centre "
        "into the model's parameters (r2sp.torch.finish() waits for it)");
  }
  return status;
}

absl::Status ClientSession::ParamsNeeded(int64_t offset, int64_t count,
                                         const Interrupt& interrupt) {
  R2SP_ASSIGN_OR_RETURN(const int64_t id, handoff_.RequestParams(offset, count, size()));
  while (true) {
    const absl::StatusOr<bool> done = handoff_.AwaitParams(id, kPoll);
    if (!done.ok()) {
      Abort(std::string(done.status().message()));
      return done.status();
    }
    if (*done) return absl::OkStatus();
    if (interrupt && interrupt()) {
      Abort("interrupted");
      return absl::CancelledError("interrupted");
    }
  }
}

bool ClientSession::EvaluationDue() {
  const absl::StatusOr<HandoffWorkload::State> state = handoff_.Wait(absl::ZeroDuration());
  return state.ok() && *state == HandoffWorkload::State::kEvaluationWanted;
}

absl::StatusOr<LoopResult> ClientSession::Finish(const Interrupt& interrupt) {
  while (true) {
    R2SP_ASSIGN_OR_RETURN(const HandoffWorkload::State state, AwaitChange(interrupt));
    if (state == HandoffWorkload::State::kOver) break;
    if (state == HandoffWorkload::State::kEvaluationWanted) {
      handoff_.SkipEvaluation();
      continue;
    }
    const WantedStep step = handoff_.step();
    const std::string why =
        state == HandoffWorkload::State::kJoined
            ? std::string("finish() before training began")
            : absl::StrCat("finish() before the job's training was over: it wants step ",
                           step.index + 1, " of ", step.epoch_steps, " of epoch ",
                           step.epoch + 1, " (iterate r2sp.torch.DistributedSampler to the end)");
    Abort(why);
    return absl::FailedPreconditionError(why);
  }
  handoff_.AllowFinal();  // the node's final pull may write the parameters now
  R2SP_RETURN_IF_ERROR(AwaitThread(interrupt));
  return handoff_.result();
}

absl::Status ClientSession::AwaitThread(const Interrupt& interrupt) {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&done_), kPoll)) break;
    }
    if (interrupt && interrupt()) {
      Abort("interrupted");
      return absl::CancelledError("interrupted");
    }
  }
  if (thread_.joinable()) thread_.join();
  absl::MutexLock lock(&mu_);
  return run_status_;
}

void ClientSession::Abort(const std::string& why) {
  if (aborted_) return;
  aborted_ = true;
  handoff_.Close(absl::CancelledError(why));
  if (node_ != nullptr) node_->Cancel();
  if (thread_.joinable()) thread_.join();
}

}  // namespace r2sp
