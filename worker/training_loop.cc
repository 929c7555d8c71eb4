// See training_loop.h: the TrainingLoop class and its progress line.
#include "worker/training_loop.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace r2sp {
namespace {

bool Emulates(const LoopOptions& options) {
  return options.emulate_ms_per_sample > 0 || options.compute_slowdown > 1.0;
}

}  // namespace

// The progress line every log_every steps: samples/s over the window for workloads with
// samples; iterations/s and mean push/pull times since the start for the synthetic one.
class TrainingLoop::Progress {
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

namespace {

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

}  // namespace

// The epoch being run: where it sits in the run and what its steps added up to so far.
struct TrainingLoop::Epoch {
  int number = 0;     // 0-based
  int64_t begins = 0; // the step it begins at, counted over the run
  int64_t steps = 1;  // its steps
  int64_t first = 0;  // its first step to run (> 0: a resumed run starting inside it)
  int64_t last = 0;   // the run's last step as far as it is known
  double loss = 0;    // the sum of its steps' losses
  int64_t done = 0;   // its steps run
};

TrainingLoop::TrainingLoop(const LoopOptions& options, Workload* workload, Exchanger* exchanger,
                           float* params, RunLog* log)
    : options_(options), workload_(workload), exchanger_(exchanger), params_(params), log_(log) {}

TrainingLoop::~TrainingLoop() = default;

absl::StatusOr<LoopResult> TrainingLoop::Run() {
  CHECK(!ran_) << "TrainingLoop::Run called twice";
  ran_ = true;
  R2SP_ASSIGN_OR_RETURN(const EpochStart at, FirstEpoch(options_));
  start_ = absl::Now();
  progress_ = std::make_unique<Progress>(options_, start_);
  Attach();
  // The workload must not keep calling into the loop once it returns, error or not.
  absl::Cleanup detach = [this] { Detach(); };
  result_.steps = options_.first_step;
  Epoch epoch;
  epoch.begins = at.begins;
  epoch.steps = at.steps;
  for (epoch.number = at.epoch; epoch.number < options_.epochs;
       epoch.begins += epoch.steps, ++epoch.number) {
    if (options_.max_steps > 0 && result_.steps >= options_.max_steps) break;
    if (epoch.number > at.epoch) {
      R2SP_ASSIGN_OR_RETURN(epoch.steps, EpochSteps(epoch.number));
    }
    epoch.first = epoch.number == at.epoch ? options_.first_step - epoch.begins : 0;
    epoch.loss = 0;
    epoch.done = 0;
    R2SP_ASSIGN_OR_RETURN(const bool more, RunEpoch(&epoch));
    if (!more) break;
  }
  // The run ends with the parameters whole, whatever an epoch plan did to its last step.
  R2SP_RETURN_IF_ERROR_WITH(exchanger_->FinishPull(), "pull");
  if (!result_.left && options_.settle) {
    R2SP_RETURN_IF_ERROR(options_.settle(result_.steps));
    if (final_evaluation_epoch_ >= 0) {
      R2SP_RETURN_IF_ERROR(Evaluate(final_evaluation_epoch_, true, result_.last_epoch_loss));
    }
  }
  result_.seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  return result_;
}

void TrainingLoop::Attach() {
  const bool reports = exchanger_->overlaps_backward(), reads = exchanger_->overlaps_pulls();
  if (!reports && !reads) return;
  Exchanger* const e = exchanger_;
  step_ = std::make_unique<EmulatedStep>(
      Emulates(options_),
      EmulatedStepSinks{[e](HostGradient g, int64_t offset, int64_t count) {
                          e->GradientReady(g, offset, count);
                        },
                        [e](int64_t offset, int64_t count) { e->ParamsNeeded(offset, count); },
                        [e] { return e->pull_stall(); }});
  EmulatedStep* const step = step_.get();
  if (reports) {
    workload_->set_gradient_ready([step](HostGradient grads, int64_t offset, int64_t count) {
      step->Report(grads, offset, count);
    });
  }
  forward_waits_ = reads && workload_->set_params_needed([step](int64_t offset, int64_t count) {
    step->ParamsNeeded(offset, count);
  });
}

void TrainingLoop::Detach() {
  if (exchanger_->overlaps_backward()) workload_->set_gradient_ready(nullptr);
  if (forward_waits_) workload_->set_params_needed(nullptr);
}

absl::StatusOr<int64_t> TrainingLoop::EpochSteps(int epoch) {
  if (!options_.plan_epoch) return options_.steps_per_epoch;
  return options_.plan_epoch(epoch, false);
}

absl::StatusOr<bool> TrainingLoop::RunEpoch(Epoch* e) {
  // The run's last step as far as it is known: the epochs left as long as this one.
  const int64_t total = e->begins + (options_.epochs - e->number) * e->steps;
  e->last = options_.max_steps > 0 ? std::min(total, options_.max_steps) : total;
  if (result_.steps >= e->last) return false;
  workload_->StartEpoch(e->number, std::min(e->steps, e->last - e->begins));
  if (e->first > 0) {
    workload_->SkipSteps(e->first, exchanger_->next_batch());
    std::printf("worker %d: resuming at step %lld (epoch %d, step %lld of it)\n", options_.rank,
                static_cast<long long>(options_.first_step), e->number + 1,
                static_cast<long long>(e->first + 1));
    std::fflush(stdout);
  }
  for (int64_t s = e->first; s < e->steps && result_.steps < e->last; ++s) {
    R2SP_RETURN_IF_ERROR(RunStep(e, s));
    if (options_.leave_requested && options_.leave_requested()) {
      result_.left = true;
      return false;
    }
  }
  if (e->done == 0) return false;
  result_.epochs = e->number + 1;
  result_.last_epoch_loss = e->loss / e->done;
  if (!workload_->EvaluatesAfterEpoch()) return true;
  const bool run_over = e->number + 1 == options_.epochs ||
                        (options_.max_steps > 0 && result_.steps >= options_.max_steps);
  if (run_over && options_.settle) {
    final_evaluation_epoch_ = e->number;  // after the settle (Run)
    return true;
  }
  R2SP_RETURN_IF_ERROR(Evaluate(e->number, true, result_.last_epoch_loss));
  return true;
}

absl::Status TrainingLoop::RunStep(Epoch* e, int64_t s) {
  IterationMetrics m;
  m.clock = result_.steps;
  m.epoch = e->number;
  ComputeStart start;
  start.clock = m.clock;
  start.batch = exchanger_->next_batch();
  start.epochs_done = e->number + static_cast<double>(s) / e->steps;
  start.iterations_left = e->last - result_.steps;
  start.params = params_;
  // The epoch's evaluation follows its last step, or the run's (--max_steps mid-epoch).
  const bool evaluates = workload_->EvaluatesAfterEpoch();
  const bool epoch_end = s + 1 == e->steps || start.iterations_left == 1;
  const bool evaluate_now =
      evaluates && !epoch_end && EvaluatesMidEpoch(options_, result_.steps + 1);
  start.evaluation_next = evaluates && (epoch_end || evaluate_now);
  exchanger_->BeginCompute(start);
  absl::Time t0, t1;
  R2SP_ASSIGN_OR_RETURN(const ComputedStep step, Compute(start.batch, &m, &t0, &t1));
  if (log_ != nullptr) {
    log_->Span("compute", t0, t1,
               step.samples > 0 ? absl::StrCat("{\"batch\": ", step.samples, "}") : "");
    for (const DeviceStepSpan& d : step.device_spans) {
      log_->Span(d.name.c_str(), t0 + absl::Seconds(d.begin_seconds),
                 t0 + absl::Seconds(d.end_seconds), "");
    }
  }
  ExchangeStep exchange;
  exchange.grads = step.grads;
  exchange.params = params_;
  exchange.computed = t1;
  exchange.iterations_left = start.iterations_left;
  exchange.forward_waits = forward_waits_;
  exchange.evaluation_next = start.evaluation_next;
  R2SP_RETURN_IF_ERROR(exchanger_->Exchange(exchange, &m));
  if (log_ != nullptr) log_->Metrics(m);
  Account(m, e);
  progress_->Step(result_, m, s, e->steps);
  if (evaluate_now) R2SP_RETURN_IF_ERROR(Evaluate(e->number, false, e->loss / e->done));
  return absl::OkStatus();
}

// The workload's step, the rest of a pull it overlapped, then the sleep that emulation asks
// for (replaying held gradient-ready reports through it; EmulatedStep). Time spent waiting for
// the pull in here (stall; waits before it, an evaluation's, are not this compute's) is pull
// time, not compute, and is not stretched; the emulated forward's sleeps before its reads
// (paced) are emulated compute, not the workload's.
absl::StatusOr<ComputedStep> TrainingLoop::Compute(int batch, IterationMetrics* m,
                                                   absl::Time* t0, absl::Time* t1) {
  const absl::Time start = absl::Now();
  if (step_ != nullptr) step_->Begin(start);
  const absl::Duration stalled_before = exchanger_->pull_stall();
  R2SP_ASSIGN_OR_RETURN(ComputedStep step, workload_->ComputeGradient(m->clock, batch, params_));
  R2SP_RETURN_IF_ERROR_WITH(exchanger_->FinishPull(), "pull");
  const absl::Duration stall = exchanger_->pull_stall() - stalled_before;
  const absl::Duration paced = step_ != nullptr ? step_->paced() : absl::ZeroDuration();
  const absl::Duration worked = absl::Now() - start - stall - paced;
  absl::Duration target = worked;
  if (options_.emulate_ms_per_sample > 0) {
    target = std::max(target, absl::Milliseconds(options_.emulate_ms_per_sample * step.samples));
  }
  if (options_.compute_slowdown > 1.0) target = target * options_.compute_slowdown;
  if (step_ != nullptr) {
    step_->Finish(absl::FDivDuration(target, std::max(worked, absl::Nanoseconds(1))));
  }
  const absl::Duration left = start + stall + target - absl::Now();
  if (left > absl::ZeroDuration()) std::this_thread::sleep_for(absl::ToChronoNanoseconds(left));
  *t0 = start;
  *t1 = absl::Now();
  m->batch = step.samples;
  m->loss = step.loss;
  m->compute_seconds = absl::ToDoubleSeconds(*t1 - start - stall);
  return step;
}

void TrainingLoop::Account(const IterationMetrics& m, Epoch* e) {
  result_.compute_seconds += m.compute_seconds;
  result_.wait_seconds += m.wait_seconds;
  result_.push_seconds += m.push_seconds;
  result_.pull_seconds += m.pull_seconds;
  result_.early_partitions += m.early_partitions;
  result_.overlapped_pulls += m.pull_overlapped;
  ++result_.steps;
  result_.samples += m.batch;
  result_.final_batch = m.batch;
  e->loss += m.loss;
  ++e->done;
}

absl::Status TrainingLoop::Evaluate(int epoch, bool epoch_end, double train_loss) {
  // The step before an evaluation waits for its pull (ExchangeStep::evaluation_next); this is
  // for an epoch plan that ended the run sooner than the loop knew.
  R2SP_RETURN_IF_ERROR_WITH(exchanger_->FinishPull(), "pull");
  // Elastic averaging evaluates the centre, not this worker's own parameters.
  R2SP_ASSIGN_OR_RETURN(const float* const evaluated_params,
                        WithContext(exchanger_->EvaluationParams(params_), "evaluation"));
  R2SP_ASSIGN_OR_RETURN(const std::optional<TestEvaluation> evaluated,
                        workload_->EvaluateTest(evaluated_params));
  if (!evaluated.has_value()) return absl::OkStatus();
  const TestEvaluation& eval = *evaluated;
  result_.test_accuracy = eval.accuracy;
  EvaluationRecord record;
  record.epoch = epoch + 1;
  record.step = result_.steps;
  record.test_accuracy = eval.accuracy;
  record.test_loss = eval.loss;
  record.train_loss = train_loss;
  record.elapsed_seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  if (log_ != nullptr) log_->Evaluation(record);
  const std::string when = epoch_end ? absl::StrCat("epoch ", record.epoch, " done")
                                     : absl::StrCat("step ", result_.steps);
  std::printf("worker %d: %s: train loss %.4f, test accuracy %.4f (loss %.4f), %.1f s\n",
              options_.rank, when.c_str(), record.train_loss, record.test_accuracy,
              record.test_loss, record.elapsed_seconds);
  std::fflush(stdout);
  return absl::OkStatus();
}

absl::StatusOr<LoopResult> RunTrainingLoop(const LoopOptions& options, Workload* workload,
                                           Exchanger* exchanger, float* params, RunLog* log) {
  return TrainingLoop(options, workload, exchanger, params, log).Run();
}

}  // namespace r2sp
