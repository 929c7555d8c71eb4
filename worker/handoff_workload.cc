// See handoff_workload.h.
#include "worker/handoff_workload.h"

#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace r2sp {

HandoffWorkload::HandoffWorkload(const float* fp32, const uint16_t* fp16)
    : fp32_(fp32), fp16_(fp16) {}

// --- The node's side.

void HandoffWorkload::Joined(const JoinedJob& job) {
  absl::MutexLock lock(&mu_);
  joined_ = job;
  if (state_ == State::kJoining) state_ = State::kJoined;
}

absl::StatusOr<int64_t> HandoffWorkload::AwaitStart() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](HandoffWorkload* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
        return w->train_samples_ > 0 || !w->closed_.ok();
      },
      this));
  if (!closed_.ok()) return closed_;
  return train_samples_;
}

void HandoffWorkload::SetTraining(int world) {
  absl::MutexLock lock(&mu_);
  all_shards_.resize(world);
  std::iota(all_shards_.begin(), all_shards_.end(), 0);
}

void HandoffWorkload::SetEpochPlan(int epoch, std::vector<int> live_shards) {
  absl::MutexLock lock(&mu_);
  plans_[epoch] = std::move(live_shards);
}

void HandoffWorkload::Finish(const LoopResult& result) {
  absl::MutexLock lock(&mu_);
  result_ = result;
  state_ = State::kOver;
}

bool HandoffWorkload::AwaitFinal(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(this, &HandoffWorkload::FinalAllowed), timeout);
}

void HandoffWorkload::AllowFinal() {
  absl::MutexLock lock(&mu_);
  final_allowed_ = true;
}

void HandoffWorkload::Fail(const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  if (failed_.ok()) failed_ = why;
}

// --- Workload.

void HandoffWorkload::set_gradient_ready(::r2sp::GradientReady fn) {
  absl::MutexLock lock(&mu_);
  gradient_ready_ = std::move(fn);
}

void HandoffWorkload::StartEpoch(int epoch, int64_t steps) {
  absl::MutexLock lock(&mu_);
  const auto planned = plans_.find(epoch);
  step_.live_shards = planned != plans_.end() ? planned->second : all_shards_;
  step_.epoch_steps = steps;
  step_.epoch = epoch;
  step_.index = 0;
}

void HandoffWorkload::SkipSteps(int64_t steps, int /*batch*/) {
  absl::MutexLock lock(&mu_);
  step_.index += steps;
}

bool HandoffWorkload::set_params_needed(::r2sp::ParamsNeeded fn) {
  absl::MutexLock lock(&mu_);
  if (!forward_waits_) return false;
  params_needed_ = std::move(fn);
  return true;
}

absl::StatusOr<ComputedStep> HandoffWorkload::ComputeGradient(int64_t clock, int batch,
                                                              const float* /*params*/) {
  absl::MutexLock lock(&mu_);
  if (!closed_.ok()) return closed_;
  step_.clock = clock;
  step_.batch = batch;
  state_ = State::kStepWanted;
  ServeParamRequests();
  // Ranges still asked for (another thread submitted or closed meanwhile) need no wait of
  // their own: the loop finishes the pull as this returns.
  param_requests_.clear();
  served_ = requested_;
  if (state_ == State::kStepWanted) return closed_;  // closed before the step came
  ComputedStep step;
  step.samples = submitted_samples_;
  step.loss = submitted_loss_;
  step.grads = submitted_fp16_ ? HostGradient::Fp16(fp16_) : HostGradient(fp32_);
  ++step_.index;
  return step;
}

void HandoffWorkload::ServeParamRequests() {
  while (true) {
    mu_.Await(absl::Condition(
        +[](HandoffWorkload* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
          return w->state_ != State::kStepWanted || !w->closed_.ok() ||
                 !w->param_requests_.empty();
        },
        this));
    if (state_ != State::kStepWanted || !closed_.ok()) return;
    const auto [offset, count] = param_requests_.front();
    const ::r2sp::ParamsNeeded fn = params_needed_;
    // Unlocked: the script polls AwaitParams, and Close must get through meanwhile.
    mu_.Unlock();
    if (fn) fn(offset, count);
    mu_.Lock();
    param_requests_.pop_front();
    ++served_;
  }
}

bool HandoffWorkload::EvaluatesAfterEpoch() const {
  absl::MutexLock lock(&mu_);
  return joined_.evaluates && joined_.evaluates();
}

absl::StatusOr<std::optional<TestEvaluation>> HandoffWorkload::EvaluateTest(
    const float* /*params*/) {
  absl::MutexLock lock(&mu_);
  if (!closed_.ok()) return std::optional<TestEvaluation>();  // the run ends without one
  evaluation_.reset();
  state_ = State::kEvaluationWanted;
  mu_.Await(absl::Condition(
      +[](HandoffWorkload* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
        return w->state_ != State::kEvaluationWanted || !w->closed_.ok();
      },
      this));
  state_ = State::kRunning;
  return std::move(evaluation_);
}

// --- The script's side.

absl::StatusOr<HandoffWorkload::State> HandoffWorkload::Wait(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(this, &HandoffWorkload::Changed), timeout);
  if (!failed_.ok()) return failed_;
  if (!closed_.ok()) return closed_;
  return state_;
}

JoinedJob HandoffWorkload::joined() const {
  absl::MutexLock lock(&mu_);
  return joined_;
}

WantedStep HandoffWorkload::step() const {
  absl::MutexLock lock(&mu_);
  return step_;
}

LoopResult HandoffWorkload::result() const {
  absl::MutexLock lock(&mu_);
  return result_;
}

absl::Status HandoffWorkload::Start(int64_t train_samples) {
  absl::MutexLock lock(&mu_);
  if (train_samples < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the training set must hold at least one sample, got ", train_samples));
  }
  if (state_ != State::kJoined || train_samples_ > 0) {
    return absl::FailedPreconditionError(
        state_ == State::kJoining ? "training starts after the worker joined the job"
                                  : "training has started already");
  }
  train_samples_ = train_samples;
  state_ = State::kRunning;
  return absl::OkStatus();
}

absl::Status HandoffWorkload::GradientReady(int64_t offset, int64_t count, bool fp16,
                                            int64_t size) {
  ::r2sp::GradientReady fn;
  {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kStepWanted) {
      return absl::FailedPreconditionError(
          "a gradient is ready only during a step the job asked for (after next_step)");
    }
    if (offset < 0 || count < 0 || offset > size || count > size - offset) {
      return absl::OutOfRangeError(absl::StrCat("gradient range [", offset, ", ", offset + count,
                                                ") is outside the model's ", size, " values"));
    }
    if (fp16 && fp16_ == nullptr) {
      return absl::FailedPreconditionError("this worker has no binary16 gradient buffer");
    }
    fn = gradient_ready_;
  }
  // The loop waits in ComputeGradient until Submit, so the callback cannot go meanwhile.
  if (fn && count > 0) fn(fp16 ? HostGradient::Fp16(fp16_) : HostGradient(fp32_), offset, count);
  return absl::OkStatus();
}

absl::Status HandoffWorkload::EnableForwardWaits() {
  absl::MutexLock lock(&mu_);
  if (train_samples_ > 0) {
    return absl::FailedPreconditionError(
        "forward waits are enabled before training starts (before begin_training)");
  }
  forward_waits_ = true;
  return absl::OkStatus();
}

bool HandoffWorkload::forward_waits() const {
  absl::MutexLock lock(&mu_);
  return forward_waits_;
}

absl::StatusOr<int64_t> HandoffWorkload::RequestParams(int64_t offset, int64_t count,
                                                       int64_t size) {
  absl::MutexLock lock(&mu_);
  if (offset < 0 || count < 0 || offset > size || count > size - offset) {
    return absl::OutOfRangeError(absl::StrCat("parameter range [", offset, ", ", offset + count,
                                              ") is outside the model's ", size, " values"));
  }
  // No pull can be running outside a wanted step (the header says why), nor without the loop's
  // function (forward waits off, or the exchanger does not overlap pulls).
  if (count == 0 || state_ != State::kStepWanted || !params_needed_ || !closed_.ok()) return 0;
  param_requests_.emplace_back(offset, count);
  return ++requested_;
}

absl::StatusOr<bool> HandoffWorkload::AwaitParams(int64_t id, absl::Duration timeout) {
  if (id <= 0) return true;
  absl::MutexLock lock(&mu_);
  const auto done = [this, id]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return served_ >= id || !closed_.ok() || !failed_.ok();
  };
  mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  if (!failed_.ok()) return failed_;
  if (!closed_.ok()) return closed_;
  return served_ >= id;
}

absl::Status HandoffWorkload::ParamsNeeded(int64_t offset, int64_t count, int64_t size) {
  R2SP_ASSIGN_OR_RETURN(const int64_t id, RequestParams(offset, count, size));
  while (true) {
    R2SP_ASSIGN_OR_RETURN(const bool done, AwaitParams(id, absl::InfiniteDuration()));
    if (done) return absl::OkStatus();
  }
}

absl::Status HandoffWorkload::Submit(int samples, double loss, bool fp16) {
  absl::MutexLock lock(&mu_);
  if (!closed_.ok()) return closed_;
  if (state_ != State::kStepWanted) {
    return absl::FailedPreconditionError(
        state_ == State::kOver ? "the job's training is over: the script ran more steps than "
                                 "the job planned (iterate r2sp.torch.DistributedSampler)"
                               : "no step is wanted now (submit follows next_step)");
  }
  if (samples < 0) {
    return absl::InvalidArgumentError(absl::StrCat("a step's samples cannot be negative, got ",
                                                   samples));
  }
  if (fp16 && fp16_ == nullptr) {
    return absl::FailedPreconditionError("this worker has no binary16 gradient buffer");
  }
  submitted_samples_ = samples;
  submitted_loss_ = loss;
  submitted_fp16_ = fp16;
  state_ = State::kRunning;
  return absl::OkStatus();
}

bool HandoffWorkload::ReportEvaluation(const TestEvaluation& evaluation) {
  absl::MutexLock lock(&mu_);
  if (state_ != State::kEvaluationWanted) return false;
  evaluation_ = evaluation;
  state_ = State::kRunning;
  return true;
}

void HandoffWorkload::SkipEvaluation() {
  absl::MutexLock lock(&mu_);
  if (state_ == State::kEvaluationWanted) state_ = State::kRunning;
}

void HandoffWorkload::Close(const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  if (closed_.ok()) closed_ = why.ok() ? absl::CancelledError("closed") : why;
}

}  // namespace r2sp
