// See training_run.h: the run's steps, its epochs, evaluations and progress line.
#include "worker/training_run.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace r2sp {
namespace {

bool Emulates(const LoopOptions& options) {
  return options.emulate_ms_per_sample > 0 || options.compute_slowdown > 1.0;
}

// The epoch a run starts in: its number, the step it begins at, and its steps.
struct EpochStart {
  int epoch = 0;
  int64_t begins = 0;
  int64_t steps = 1;
};

// Where options.first_step falls (with plan_epoch, walking the planned epochs to it).
absl::StatusOr<EpochStart> FirstEpoch(const LoopOptions& options) {
  EpochStart at;
  if (!options.plan_epoch) {
    at.epoch = static_cast<int>(options.first_step / options.steps_per_epoch);
    at.begins = at.epoch * options.steps_per_epoch;
    at.steps = options.steps_per_epoch;
    return at;
  }
  for (; options.first_step > 0 && at.epoch + 1 < options.epochs; ++at.epoch) {
    R2SP_ASSIGN_OR_RETURN(const int64_t steps, options.plan_epoch(at.epoch, false));
    if (options.first_step < at.begins + steps) break;
    at.begins += steps;
  }
  R2SP_ASSIGN_OR_RETURN(at.steps, options.plan_epoch(at.epoch, true));
  return at;
}

// Whether the step that makes `steps_done` steps in all ends with a mid-epoch evaluation.
bool EvaluatesMidEpoch(const LoopOptions& options, int64_t steps_done) {
  return options.eval_every > 0 && steps_done % options.eval_every == 0;
}

void SleepIfPositive(absl::Duration d) {
  if (d > absl::ZeroDuration()) absl::SleepFor(d);
}

}  // namespace

// The progress line every log_every steps: samples/s over the window for workloads with
// samples; iterations/s and mean push/pull times since the start for the synthetic one.
class TrainingRun::Progress {
 public:
  Progress(const LoopOptions& options, absl::Time start)
      : options_(options), start_(start), window_start_(start) {}

  void Step(const LoopResult& so_far, const IterationMetrics& m, int64_t step_in_epoch,
            int64_t epoch_steps) {
    window_samples_ += m.batch;
    if (options_.log_every <= 0 || so_far.steps % options_.log_every != 0) return;
    const absl::Time now = absl::Now();
    if (m.batch > 0) {
      std::printf("worker %d: epoch %d step %lld/%lld loss %.4f batch %d %.0f samples/s\n",
                  options_.rank, m.epoch + 1, static_cast<long long>(step_in_epoch + 1),
                  static_cast<long long>(epoch_steps), m.loss, m.batch,
                  window_samples_ / absl::ToDoubleSeconds(now - window_start_));
    } else {
      const double steps = static_cast<double>(so_far.steps);
      std::printf("worker %d: iteration %lld/%lld  %.1f it/s  push %.2f ms  pull %.2f ms\n",
                  options_.rank, static_cast<long long>(so_far.steps),
                  static_cast<long long>(options_.steps_per_epoch * options_.epochs),
                  steps / absl::ToDoubleSeconds(now - start_), so_far.push_seconds * 1e3 / steps,
                  so_far.pull_seconds * 1e3 / steps);
    }
    std::fflush(stdout);
    window_start_ = now;
    window_samples_ = 0;
  }

 private:
  const LoopOptions& options_;
  const absl::Time start_;
  absl::Time window_start_;
  int64_t window_samples_ = 0;
};

TrainingRun::TrainingRun(const LoopOptions& options, Exchanger* exchanger, float* params,
                         RunLog* log, RunHooks hooks, bool forward_waits)
    : options_(options),
      exchanger_(exchanger),
      params_(params),
      log_(log),
      hooks_(std::move(hooks)),
      forward_waits_(forward_waits && exchanger->overlaps_pulls()) {
  if (Emulates(options_)) {
    Exchanger* const e = exchanger_;
    pacer_ = std::make_unique<EmulatedStep>(EmulatedStepSinks{
        [e](HostGradient g, int64_t offset, int64_t count) { e->GradientReady(g, offset, count); },
        [e](int64_t offset, int64_t count) { e->ParamsNeeded(offset, count); },
        [e] { return e->pull_stall(); }});
  }
}

TrainingRun::~TrainingRun() = default;

absl::Status TrainingRun::Start() {
  started_ = true;
  R2SP_ASSIGN_OR_RETURN(const EpochStart at, FirstEpoch(options_));
  start_ = absl::Now();
  progress_ = std::make_unique<Progress>(options_, start_);
  result_.steps = options_.first_step;
  epoch_.begins = at.begins;
  epoch_.steps = at.steps;
  R2SP_ASSIGN_OR_RETURN(const bool more, EnterEpoch(at.epoch, /*run_starts=*/true));
  return more ? absl::OkStatus() : End();
}

absl::StatusOr<bool> TrainingRun::EnterEpoch(int number, bool run_starts) {
  epoch_.number = number;
  if (number >= options_.epochs) return false;
  if (options_.max_steps > 0 && result_.steps >= options_.max_steps) return false;
  epoch_.first = run_starts ? options_.first_step - epoch_.begins : 0;
  // The run's last step as far as it is known: the epochs left as long as this one.
  const int64_t total = epoch_.begins + (options_.epochs - number) * epoch_.steps;
  epoch_.last = options_.max_steps > 0 ? std::min(total, options_.max_steps) : total;
  if (result_.steps >= epoch_.last) return false;
  epoch_.next = epoch_.first;
  epoch_.loss = 0;
  epoch_.done = 0;
  if (hooks_.start_epoch) {
    hooks_.start_epoch(number, std::min(epoch_.steps, epoch_.last - epoch_.begins), epoch_.first,
                       exchanger_->next_batch());
  }
  if (epoch_.first > 0) {
    std::printf("worker %d: resuming at step %lld (epoch %d, step %lld of it)\n", options_.rank,
                static_cast<long long>(options_.first_step), number + 1,
                static_cast<long long>(epoch_.first + 1));
    std::fflush(stdout);
  }
  return true;
}

absl::StatusOr<std::optional<RunStep>> TrainingRun::Next() {
  if (step_out_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "step ", out_.step.clock, " is out and not completed: each step's gradient is "
        "exchanged (completed) before the next step"));
  }
  due_.reset();  // an evaluation not reported is passed over
  if (!started_) R2SP_RETURN_IF_ERROR(Start());
  while (!over_ && (epoch_.next >= epoch_.steps || result_.steps >= epoch_.last)) {
    epoch_.begins += epoch_.steps;
    const int number = epoch_.number + 1;
    bool more = number < options_.epochs;
    if (more && options_.plan_epoch) {
      R2SP_ASSIGN_OR_RETURN(epoch_.steps, options_.plan_epoch(number, false));
    }
    if (more) {
      R2SP_ASSIGN_OR_RETURN(more, EnterEpoch(number, /*run_starts=*/false));
    }
    if (!more) R2SP_RETURN_IF_ERROR(End());
  }
  if (over_) return std::nullopt;
  Out& o = out_;
  o.step.clock = result_.steps;
  o.step.epoch = epoch_.number;
  o.step.index = epoch_.next;
  o.step.epoch_steps = std::min(epoch_.steps, epoch_.last - epoch_.begins);
  o.step.batch = exchanger_->next_batch();
  o.iterations_left = epoch_.last - result_.steps;
  // The epoch's evaluation follows its last step, or the run's (--max_steps mid-epoch).
  const bool evaluates = hooks_.evaluates && hooks_.evaluates();
  o.epoch_end = epoch_.next + 1 == epoch_.steps || o.iterations_left == 1;
  o.evaluate_now =
      evaluates && !o.epoch_end && EvaluatesMidEpoch(options_, result_.steps + 1);
  o.evaluation_next = evaluates && (o.epoch_end || o.evaluate_now);
  ComputeStart start;
  start.clock = o.step.clock;
  start.batch = o.step.batch;
  start.epochs_done = epoch_.number + static_cast<double>(epoch_.next) / epoch_.steps;
  start.iterations_left = o.iterations_left;
  start.evaluation_next = o.evaluation_next;
  start.params = params_;
  exchanger_->BeginCompute(start);
  o.started = absl::Now();
  o.stalled_before = exchanger_->pull_stall();
  if (pacer_ != nullptr) pacer_->Begin(o.started);
  step_out_ = true;
  return o.step;
}

void TrainingRun::GradientReady(HostGradient grads, int64_t offset, int64_t count) {
  if (!step_out_ || !exchanger_->overlaps_backward()) return;
  if (pacer_ != nullptr) {
    pacer_->Report(grads, offset, count);
  } else {
    exchanger_->GradientReady(grads, offset, count);
  }
}

void TrainingRun::ParamsNeeded(int64_t offset, int64_t count) {
  if (!step_out_ || !forward_waits_) return;
  if (pacer_ != nullptr) {
    pacer_->ParamsNeeded(offset, count);
  } else {
    exchanger_->ParamsNeeded(offset, count);
  }
}

// The rest of a pull the compute overlapped, then the sleep that emulation asks for (replaying
// held gradient-ready reports through it: EmulatedStep). Time spent waiting for the pull in
// here (stall) is pull time, not compute, and is not stretched; the emulated forward's sleeps
// before its reads (paced) are emulated compute, not the caller's.
absl::Time TrainingRun::ComputeBegan(const ComputedStep& step) const {
  return step.began > absl::InfinitePast() ? std::min(step.began, out_.started) : out_.started;
}

absl::Status TrainingRun::FinishCompute(const ComputedStep& step, IterationMetrics* m,
                                        absl::Time* end) {
  const absl::Time start = ComputeBegan(step);
  R2SP_RETURN_IF_ERROR_WITH(exchanger_->FinishPull(), "pull");
  const absl::Duration stall = exchanger_->pull_stall() - out_.stalled_before;
  if (pacer_ != nullptr) {
    const absl::Duration worked = absl::Now() - start - stall - pacer_->paced();
    absl::Duration target = worked;
    if (options_.emulate_ms_per_sample > 0) {
      target = std::max(target, absl::Milliseconds(options_.emulate_ms_per_sample * step.samples));
    }
    if (options_.compute_slowdown > 1.0) target = target * options_.compute_slowdown;
    pacer_->Finish(absl::FDivDuration(target, std::max(worked, absl::Nanoseconds(1))));
    // The sleeps before reads (paced) are part of the target, not added to it.
    SleepIfPositive(start + stall + target - absl::Now());
  }
  *end = absl::Now();
  m->batch = step.samples;
  m->loss = step.loss;
  m->compute_seconds = absl::ToDoubleSeconds(*end - start - stall);
  return absl::OkStatus();
}

absl::Status TrainingRun::Complete(const ComputedStep& step) {
  if (!step_out_) {
    return absl::FailedPreconditionError("no step is out: a step is completed once, after Next");
  }
  step_out_ = false;
  IterationMetrics m;
  m.clock = out_.step.clock;
  m.epoch = epoch_.number;
  absl::Time computed;
  R2SP_RETURN_IF_ERROR(FinishCompute(step, &m, &computed));
  if (log_ != nullptr) {
    const absl::Time t0 = ComputeBegan(step);
    log_->Span("compute", t0, computed,
               step.samples > 0 ? absl::StrCat("{\"batch\": ", step.samples, "}") : "");
    for (const DeviceStepSpan& d : step.device_spans) {
      log_->Span(d.name.c_str(), t0 + absl::Seconds(d.begin_seconds),
                 t0 + absl::Seconds(d.end_seconds), "");
    }
  }
  ExchangeStep exchange;
  exchange.grads = step.grads;
  exchange.params = params_;
  exchange.computed = computed;
  exchange.iterations_left = out_.iterations_left;
  exchange.forward_waits = forward_waits_;
  exchange.evaluation_next = out_.evaluation_next;
  R2SP_RETURN_IF_ERROR(exchanger_->Exchange(exchange, &m));
  if (log_ != nullptr) log_->Metrics(m);
  Account(m);
  progress_->Step(result_, m, out_.step.index, epoch_.steps);
  return AfterStep();
}

void TrainingRun::Account(const IterationMetrics& m) {
  result_.compute_seconds += m.compute_seconds;
  result_.wait_seconds += m.wait_seconds;
  result_.push_seconds += m.push_seconds;
  result_.pull_seconds += m.pull_seconds;
  result_.early_partitions += m.early_partitions;
  result_.overlapped_pulls += m.pull_overlapped;
  ++result_.steps;
  result_.samples += m.batch;
  result_.final_batch = m.batch;
  epoch_.loss += m.loss;
  ++epoch_.done;
  ++epoch_.next;
}

absl::Status TrainingRun::AfterStep() {
  if (out_.evaluate_now) {
    due_ = Due{epoch_.number, false, epoch_.loss / epoch_.done};
  }
  const bool leaving = options_.leave_requested && options_.leave_requested();
  if (leaving) {
    result_.left = true;  // no evaluation after it
    return End();
  }
  if (!out_.epoch_end && result_.steps < epoch_.last) return absl::OkStatus();
  result_.epochs = epoch_.number + 1;
  result_.last_epoch_loss = epoch_.loss / epoch_.done;
  const bool run_over = epoch_.number + 1 == options_.epochs ||
                        (options_.max_steps > 0 && result_.steps >= options_.max_steps);
  const bool evaluates = hooks_.evaluates && hooks_.evaluates();
  if (run_over) {
    if (evaluates) final_evaluation_epoch_ = epoch_.number;  // after the settle (End)
    return End();
  }
  if (evaluates) due_ = Due{epoch_.number, true, result_.last_epoch_loss};
  return absl::OkStatus();
}

absl::Status TrainingRun::End() {
  over_ = true;
  if (ended_) return absl::OkStatus();
  ended_ = true;
  // The run ends with the parameters whole, whatever an epoch plan did to its last step.
  R2SP_RETURN_IF_ERROR_WITH(exchanger_->FinishPull(), "pull");
  if (result_.left) return absl::OkStatus();
  if (options_.settle) R2SP_RETURN_IF_ERROR(options_.settle(result_.steps));
  if (final_evaluation_epoch_ >= 0) {
    due_ = Due{final_evaluation_epoch_, true, result_.last_epoch_loss};
  }
  return absl::OkStatus();
}

absl::StatusOr<const float*> TrainingRun::EvaluationParams() {
  // The step before an evaluation waits for its pull (ExchangeStep::evaluation_next); this is
  // for an epoch plan that ended the run sooner than the run knew.
  R2SP_RETURN_IF_ERROR_WITH(exchanger_->FinishPull(), "pull");
  // Elastic averaging evaluates the centre, not this worker's own parameters.
  return WithContext(exchanger_->EvaluationParams(params_), "evaluation");
}

void TrainingRun::Evaluated(const std::optional<TestEvaluation>& evaluated) {
  if (!due_.has_value()) return;
  const Due due = *due_;
  due_.reset();
  if (!evaluated.has_value()) return;
  result_.test_accuracy = evaluated->accuracy;
  EvaluationRecord record;
  record.epoch = due.epoch + 1;
  record.step = result_.steps;
  record.test_accuracy = evaluated->accuracy;
  record.test_loss = evaluated->loss;
  record.train_loss = due.train_loss;
  record.elapsed_seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  if (log_ != nullptr) log_->Evaluation(record);
  const std::string when = due.epoch_end ? absl::StrCat("epoch ", record.epoch, " done")
                                         : absl::StrCat("step ", result_.steps);
  std::printf("worker %d: %s: train loss %.4f, test accuracy %.4f (loss %.4f), %.1f s\n",
              options_.rank, when.c_str(), record.train_loss, record.test_accuracy,
              record.test_loss, record.elapsed_seconds);
  std::fflush(stdout);
}

absl::StatusOr<LoopResult> TrainingRun::Finish() {
  if (!over_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the run is not over: it wants step ", epoch_.next + 1, " of ", epoch_.steps,
        " of epoch ", epoch_.number + 1));
  }
  LoopResult result = result_;
  result.seconds = started_ ? absl::ToDoubleSeconds(absl::Now() - start_) : 0.0;
  return result;
}

}  // namespace r2sp
