// See script_trainer.h.
#include "worker/script_trainer.h"

#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/sync_modes.h"
#include "worker/elastic_exchange.h"
#include "worker/worker_reports.h"

namespace r2sp {

ScriptTrainer::ScriptTrainer(WorkerSession* session, std::vector<proto::TensorSpec> tensors,
                             float* params)
    : session_(session), tensors_(std::move(tensors)), params_(params) {
  for (const proto::TensorSpec& t : tensors_) size_ += static_cast<int64_t>(t.num_elements());
}

ScriptTrainer::~ScriptTrainer() = default;

absl::Status ScriptTrainer::Join() {
  if (joined_) return absl::FailedPreconditionError("the worker has joined the job already");
  joined_ = true;
  R2SP_RETURN_IF_ERROR(JoinWith(session_, this));
  const proto::AddressBook& book = session_->book();
  job_.rank = session_->rank();
  job_.workers = book.workers_size();
  job_.mode = SyncModeName(book.sync());
  job_.hetero_batching = book.hetero_batching();
  job_.data_world = session_->DataWorld();
  job_.data_shard = session_->registration().data_shard();
  job_.first_step = session_->first_step();
  job_.batch_size = job_.hetero_batching ? book.initial_batch() : session_->options().batch_size;
  const ExchangerOptions mode = session_->JobMode();
  job_.overlaps_backward = mode.overlap;
  job_.overlaps_pulls = mode.overlaps_pulls();
  if (Elastic(book.sync())) job_.elastic_period = book.elastic_period();
  return absl::OkStatus();
}

absl::Status ScriptTrainer::EnableForwardWaits() {
  if (run_ != nullptr) {
    return absl::FailedPreconditionError(
        "forward waits are enabled before training starts (before begin_training)");
  }
  forward_waits_ = true;
  return absl::OkStatus();
}

absl::Status ScriptTrainer::Begin(int64_t train_samples) {
  if (train_samples < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the training set must hold at least one sample, got ", train_samples));
  }
  if (!joined_ || run_ != nullptr) {
    return absl::FailedPreconditionError(!joined_
                                             ? "training starts after the worker joined the job"
                                             : "training has started already");
  }
  R2SP_ASSIGN_OR_RETURN(const auto world_shard, session_->DataShard());
  const int world = world_shard.first;
  R2SP_ASSIGN_OR_RETURN(log_, session_->OpenLog());
  ExchangerOptions mode = session_->JobMode();
  LoopOptions loop = session_->RunOptions(/*settles=*/true, params_);
  const int log_every = session_->options().log_every;
  loop.log_every = log_every > 0 ? log_every : 50;
  session_->SizeBatches(train_samples, world, &mode, &loop);
  all_shards_.resize(world);
  std::iota(all_shards_.begin(), all_shards_.end(), 0);
  exchanger_ = std::make_unique<Exchanger>(mode, session_->ps(), session_->scheduler(), log_.get());
  session_->PlanEpochs(world, world_shard.second, train_samples, mode, exchanger_.get(), &loop,
                       [this](int epoch, const std::vector<int>& live, bool, int64_t) {
                         plans_[epoch] = live;
                       });
  RunHooks hooks;
  hooks.start_epoch = [this](int epoch, int64_t, int64_t, int) {
    const auto planned = plans_.find(epoch);
    live_ = planned != plans_.end() ? planned->second : all_shards_;
  };
  hooks.evaluates = [role = session_->evaluator()] { return role->Evaluates(); };
  run_ = std::make_unique<TrainingRun>(loop, exchanger_.get(), params_, log_.get(),
                                       std::move(hooks), forward_waits_);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<ScriptStep>> ScriptTrainer::NextStep() {
  absl::MutexLock lock(&mu_);
  if (run_ == nullptr) {
    return absl::FailedPreconditionError(
        "training has not begun (begin_training, or iterate r2sp.torch.DistributedSampler)");
  }
  R2SP_ASSIGN_OR_RETURN(const std::optional<RunStep> next, run_->Next());
  if (!next.has_value()) return std::nullopt;
  out_ = StepOf(*next);
  return out_;
}

ScriptStep ScriptTrainer::StepOf(const RunStep& run) const {
  ScriptStep step;
  static_cast<RunStep&>(step) = run;
  step.live_shards = live_;
  return step;
}

absl::Status ScriptTrainer::CheckRange(const char* what, int64_t offset, int64_t count) const {
  if (offset < 0 || count < 0 || offset > size_ || count > size_ - offset) {
    return absl::OutOfRangeError(absl::StrCat(what, " range [", offset, ", ", offset + count,
                                              ") is outside the model's ", size_, " values"));
  }
  return absl::OkStatus();
}

absl::Status ScriptTrainer::GradientReady(HostGradient grads, int64_t offset, int64_t count) {
  absl::MutexLock lock(&mu_);
  if (run_ == nullptr || !run_->step_out()) {
    return absl::FailedPreconditionError(
        "a gradient is ready only during a step the job asked for (after next_step)");
  }
  R2SP_RETURN_IF_ERROR(CheckRange("gradient", offset, count));
  if (count > 0) run_->GradientReady(grads, offset, count);
  return absl::OkStatus();
}

absl::Status ScriptTrainer::ParamsNeeded(int64_t offset, int64_t count) {
  R2SP_RETURN_IF_ERROR(CheckRange("parameter", offset, count));
  absl::MutexLock lock(&mu_);
  if (run_ != nullptr && count > 0) run_->ParamsNeeded(offset, count);
  return absl::OkStatus();
}

absl::Status ScriptTrainer::NotOver(const ScriptStep& step) {
  return absl::FailedPreconditionError(absl::StrCat(
      "finish() before the job's training was over: it wants step ", step.index + 1, " of ",
      step.epoch_steps, " of epoch ", step.epoch + 1,
      " (iterate r2sp.torch.DistributedSampler to the end)"));
}

absl::Status ScriptTrainer::Submit(const ComputedStep& step) {
  absl::MutexLock lock(&mu_);
  if (run_ == nullptr || !run_->step_out()) {
    return absl::FailedPreconditionError(
        run_ != nullptr && run_->over()
            ? "the job's training is over: the script ran more steps than the job planned "
              "(iterate r2sp.torch.DistributedSampler)"
            : "no step is wanted now (submit follows next_step)");
  }
  if (step.samples < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a step's samples cannot be negative, got ", step.samples));
  }
  if (step.skip) session_->ps()->SkipPushesOf(out_->clock);
  R2SP_RETURN_IF_ERROR(run_->Complete(step));
  submitted_clock_ = out_->clock;
  out_.reset();
  return absl::OkStatus();
}

bool ScriptTrainer::EvaluationDue() const { return run_ != nullptr && run_->evaluation_due(); }

bool ScriptTrainer::ReportEvaluation(const TestEvaluation& evaluation) {
  if (!EvaluationDue()) return false;
  run_->Evaluated(evaluation);
  return true;
}

absl::Status ScriptTrainer::PullCentre(float* out, const std::function<bool()>& interrupted) {
  if (!joined_) return absl::FailedPreconditionError("the worker has not joined the job");
  if (job_.elastic_period < 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the job's mode is ", job_.mode, ": only easgd and eawild have a centre (in the other "
        "modes the model's parameters are the servers' already)"));
  }
  if (finished_) {
    return absl::FailedPreconditionError(
        "training is over and the worker has left the job: its final pull brought the centre "
        "into the model's parameters (r2sp.torch.finish() waits for it)");
  }
  const int64_t steps = submitted_clock_ >= 0 ? submitted_clock_ + 1 : job_.first_step;
  return r2sp::PullCentre(session_->ps(), session_->book().sync(), steps / job_.elastic_period,
                          out, interrupted);
}

absl::StatusOr<LoopResult> ScriptTrainer::Finish() {
  absl::MutexLock lock(&mu_);
  if (run_ == nullptr) return absl::FailedPreconditionError("finish() before training began");
  if (finished_) return absl::FailedPreconditionError("finish() was called already");
  if (out_.has_value()) return NotOver(*out_);
  if (!run_->over()) {
    // The run learns that it is over when asked for the next step (an epoch plan left nothing).
    R2SP_ASSIGN_OR_RETURN(const std::optional<RunStep> next, run_->Next());
    if (next.has_value()) {
      out_ = StepOf(*next);
      return NotOver(*out_);
    }
  }
  R2SP_ASSIGN_OR_RETURN(const LoopResult result, run_->Finish());
  PrintTrained(session_->rank(), result);
  finished_ = true;
  R2SP_RETURN_IF_ERROR(session_->End(result, params_));
  return result;
}

}  // namespace r2sp
