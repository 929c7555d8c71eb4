// See training_loop.h.
#include "worker/training_loop.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace r2sp {
namespace {

bool Emulates(const LoopOptions& options) {
  return options.emulate_ms_per_sample > 0 || options.compute_slowdown > 1.0;
}

// Backward's gradient-ready reports on their way to the exchanger. Without emulation they go
// straight on. With emulated compute (a slower machine, an accelerator), backward really ends
// early and the sleep after it stands for the rest: the reports are held and replayed over the
// stretched compute at the same fractions of it, so that pushes start when that machine's
// backward would have produced the gradients, not all at once during the sleep.
class ReadyRelay {
 public:
  ReadyRelay(const LoopOptions& options, Exchanger* exchanger)
      : exchanger_(exchanger), hold_(Emulates(options)) {}

  void Begin(absl::Time start) { start_ = start; }
  void Report(HostGradient grads, int64_t offset, int64_t count) {
    if (!hold_) {
      exchanger_->GradientReady(grads, offset, count);
      return;
    }
    held_.push_back({absl::Now() - start_, grads, offset, count});
  }
  // Replays the held reports over [start, start + stretch x their times), sleeping between.
  void Replay(double stretch) {
    for (const Held& h : held_) {
      const absl::Time due = start_ + h.at * stretch;
      const absl::Duration wait = due - absl::Now();
      if (wait > absl::ZeroDuration()) std::this_thread::sleep_for(absl::ToChronoNanoseconds(wait));
      exchanger_->GradientReady(h.grads, h.offset, h.count);
    }
    held_.clear();
  }

 private:
  struct Held {
    absl::Duration at;  // since the compute began
    HostGradient grads;
    int64_t offset, count;
  };
  Exchanger* const exchanger_;
  const bool hold_;
  absl::Time start_;
  std::vector<Held> held_;
};

// The workload's step, the rest of a pull it overlapped, then the sleep that emulation asks
// for (replaying held gradient-ready reports through it). Time spent waiting for the pull in
// here (*stall; waits before it, an evaluation's, are not this compute's) is not stretched.
absl::StatusOr<ComputedStep> Compute(const LoopOptions& options, Workload* workload,
                                     int64_t clock, int batch, const float* params,
                                     absl::Time start, ReadyRelay* relay, Exchanger* exchanger,
                                     absl::Duration* stall_out) {
  const absl::Duration stalled_before = exchanger->pull_stall();
  R2SP_ASSIGN_OR_RETURN(ComputedStep step, workload->ComputeGradient(clock, batch, params));
  R2SP_RETURN_IF_ERROR_WITH(exchanger->FinishPull(), "pull");
  const absl::Duration stall = exchanger->pull_stall() - stalled_before;
  *stall_out = stall;
  const absl::Duration worked = absl::Now() - start - stall;
  absl::Duration target = worked;
  if (options.emulate_ms_per_sample > 0) {
    target = std::max(target, absl::Milliseconds(options.emulate_ms_per_sample * step.samples));
  }
  if (options.compute_slowdown > 1.0) target = target * options.compute_slowdown;
  if (relay != nullptr) relay->Replay(absl::FDivDuration(target, std::max(worked, absl::Nanoseconds(1))));
  const absl::Duration left = start + stall + target - absl::Now();
  if (left > absl::ZeroDuration()) std::this_thread::sleep_for(absl::ToChronoNanoseconds(left));
  return step;
}

// The progress line every log_every steps: samples/s over the window for workloads with
// samples; iterations/s and mean push/pull times since the start for the synthetic one.
class Progress {
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

// Evaluates the test set at `params` after `steps` steps in all, in (0-based) `epoch`, with
// `train_loss` the epoch's mean loss so far; `epoch_end` when the epoch is done.
absl::Status Evaluate(const LoopOptions& options, Workload* workload, Exchanger* exchanger,
                      int epoch, int64_t steps, bool epoch_end, double train_loss,
                      const float* params, absl::Time start, LoopResult* result, RunLog* log) {
  // The step before an evaluation waits for its pull (ExchangeStep::evaluation_next); this is
  // for an epoch plan that ended the run sooner than the loop knew.
  R2SP_RETURN_IF_ERROR_WITH(exchanger->FinishPull(), "pull");
  R2SP_ASSIGN_OR_RETURN(TestEvaluation eval, workload->EvaluateTest(params));
  result->test_accuracy = eval.accuracy;
  EvaluationRecord record;
  record.epoch = epoch + 1;
  record.step = steps;
  record.test_accuracy = eval.accuracy;
  record.test_loss = eval.loss;
  record.train_loss = train_loss;
  record.elapsed_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (log != nullptr) log->Evaluation(record);
  const std::string when = epoch_end ? absl::StrCat("epoch ", record.epoch, " done")
                                     : absl::StrCat("step ", steps);
  std::printf("worker %d: %s: train loss %.4f, test accuracy %.4f (loss %.4f), %.1f s\n",
              options.rank, when.c_str(), record.train_loss, record.test_accuracy,
              record.test_loss, record.elapsed_seconds);
  std::fflush(stdout);
  return absl::OkStatus();
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

}  // namespace

absl::StatusOr<LoopResult> RunTrainingLoop(const LoopOptions& options, Workload* workload,
                                           Exchanger* exchanger, float* params, RunLog* log) {
  LoopResult result;
  R2SP_ASSIGN_OR_RETURN(const EpochStart at, FirstEpoch(options));
  const absl::Time start = absl::Now();
  Progress progress(options, start);
  std::unique_ptr<ReadyRelay> relay;
  if (exchanger->overlaps_backward()) {
    relay = std::make_unique<ReadyRelay>(options, exchanger);
    workload->set_gradient_ready([r = relay.get()](HostGradient grads, int64_t offset,
                                                    int64_t count) {
      r->Report(grads, offset, count);
    });
  }
  const bool forward_waits =
      exchanger->overlaps_pulls() &&
      workload->set_params_needed([exchanger](int64_t offset, int64_t count) {
        exchanger->ParamsNeeded(offset, count);
      });
  // The workload must not keep calling the relay or the exchanger once the loop returns, error
  // or not.
  absl::Cleanup detach = [&relay, workload, forward_waits] {
    if (relay != nullptr) workload->set_gradient_ready(nullptr);
    if (forward_waits) workload->set_params_needed(nullptr);
  };
  result.steps = options.first_step;
  int64_t begins = at.begins;  // the step the epoch begins at
  int64_t epoch_steps = at.steps;
  for (int epoch = at.epoch; epoch < options.epochs; begins += epoch_steps, ++epoch) {
    if (options.max_steps > 0 && result.steps >= options.max_steps) break;
    if (epoch > at.epoch) {
      if (options.plan_epoch) {
        R2SP_ASSIGN_OR_RETURN(epoch_steps, options.plan_epoch(epoch, false));
      } else {
        epoch_steps = options.steps_per_epoch;
      }
    }
    // The run's last step as far as it is known: the epochs left as long as this one.
    const int64_t total = begins + (options.epochs - epoch) * epoch_steps;
    const int64_t last = options.max_steps > 0 ? std::min(total, options.max_steps) : total;
    if (result.steps >= last) break;
    workload->StartEpoch(epoch);
    double epoch_loss = 0;
    int64_t steps_done = 0;
    const int64_t first = epoch == at.epoch ? options.first_step - begins : 0;
    if (first > 0) {
      workload->SkipSteps(first, exchanger->next_batch());
      std::printf("worker %d: resuming at step %lld (epoch %d, step %lld of it)\n", options.rank,
                  static_cast<long long>(options.first_step), epoch + 1,
                  static_cast<long long>(first + 1));
      std::fflush(stdout);
    }
    for (int64_t s = first; s < epoch_steps && result.steps < last; ++s) {
      IterationMetrics m;
      m.clock = result.steps;
      m.epoch = epoch;
      const int batch = exchanger->next_batch();
      exchanger->BeginCompute(m.clock, batch, epoch + static_cast<double>(s) / epoch_steps,
                              last - result.steps);
      const absl::Time t0 = absl::Now();
      if (relay != nullptr) relay->Begin(t0);
      absl::Duration stall;  // waited for the pull during this compute: pull time, not compute
      R2SP_ASSIGN_OR_RETURN(ComputedStep step, Compute(options, workload, m.clock, batch, params,
                                                       t0, relay.get(), exchanger, &stall));
      const absl::Time t1 = absl::Now();
      m.batch = step.samples;
      m.loss = step.loss;
      m.compute_seconds = absl::ToDoubleSeconds(t1 - t0 - stall);
      if (log != nullptr) {
        log->Span("compute", t0, t1,
                  step.samples > 0 ? absl::StrCat("{\"batch\": ", step.samples, "}") : "");
        for (const DeviceStepSpan& d : step.device_spans) {
          log->Span(d.name.c_str(), t0 + absl::Seconds(d.begin_seconds),
                    t0 + absl::Seconds(d.end_seconds),
                    "");
        }
      }
      ExchangeStep exchange;
      exchange.grads = step.grads;
      exchange.params = params;
      exchange.computed = t1;
      exchange.iterations_left = last - result.steps;
      exchange.forward_waits = forward_waits;
      // The epoch's evaluation follows its last step, or the run's (--max_steps mid-epoch).
      const bool epoch_end = s + 1 == epoch_steps || exchange.iterations_left == 1;
      const bool evaluate_now = workload->EvaluatesAfterEpoch() && !epoch_end &&
                                EvaluatesMidEpoch(options, result.steps + 1);
      exchange.evaluation_next = workload->EvaluatesAfterEpoch() && (epoch_end || evaluate_now);
      R2SP_RETURN_IF_ERROR(exchanger->Exchange(exchange, &m));
      if (log != nullptr) log->Metrics(m);
      result.compute_seconds += m.compute_seconds;
      result.wait_seconds += m.wait_seconds;
      result.push_seconds += m.push_seconds;
      result.pull_seconds += m.pull_seconds;
      result.early_partitions += m.early_partitions;
      result.overlapped_pulls += m.pull_overlapped;
      ++result.steps;
      result.samples += m.batch;
      result.final_batch = m.batch;
      epoch_loss += m.loss;
      ++steps_done;
      progress.Step(result, m, s, epoch_steps);
      if (evaluate_now) {
        R2SP_RETURN_IF_ERROR(Evaluate(options, workload, exchanger, epoch, result.steps, false,
                                      epoch_loss / steps_done, params, start, &result,
                                      log));
      }
    }
    if (steps_done == 0) break;
    result.epochs = epoch + 1;
    result.last_epoch_loss = epoch_loss / steps_done;
    if (workload->EvaluatesAfterEpoch()) {
      R2SP_RETURN_IF_ERROR(Evaluate(options, workload, exchanger, epoch, result.steps, true,
                                    result.last_epoch_loss, params, start, &result, log));
    }
  }
  // The run ends with the parameters whole, whatever an epoch plan did to its last step.
  R2SP_RETURN_IF_ERROR_WITH(exchanger->FinishPull(), "pull");
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return result;
}

}  // namespace r2sp
