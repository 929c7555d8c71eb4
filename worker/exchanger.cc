// See exchanger.h.
#include "worker/exchanger.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/codec/codec_spec.h"
#include "common/status_macros.h"
#include "common/sync_modes.h"
#include "glog/logging.h"

namespace r2sp {

Exchanger::Exchanger(const ExchangerOptions& options, PsClient* ps, SchedulerClient* scheduler,
                     RunLog* log)
    : options_(options),
      global_batch_(options.global_batch),
      workers_(options.workers),
      ps_(ps),
      scheduler_(scheduler),
      log_(log),
      next_batch_(std::make_shared<std::atomic<int>>(options.initial_batch)) {
  if (Elastic(options.sync)) {
    CHECK(!options.overlap) << "elastic averaging does not overlap (CheckJobMode refuses it)";
    elastic_ = std::make_unique<ElasticExchange>(options.sync, options.elastic, ps,
                                                 options.pull_codec);
  } else if (options.overlap) {
    pusher_ = std::make_unique<BucketPusher>(ps, options.bucket_bytes,
                                             options.early_pulls_in_flight);
    // r2sp: the slot gates the push; ask for it early (early_slot.h).
    if (options.sync == proto::R2SP) {
      early_slot_ = std::make_unique<EarlySlot>(scheduler, pusher_.get());
    }
  }
}

// Replies must not write the parameters after the exchanger is gone (an error ended the loop).
Exchanger::~Exchanger() {
  if (pending_pull_.has_value()) pending_pull_->Wait().IgnoreError();
  // An iteration an error cut short: its pushes, and the pulls that followed them.
  if (pusher_ != nullptr) pusher_->Abandon();
}

bool Exchanger::pulls_follow_pushes() const {
  return pusher_ != nullptr && options_.early_pulls && options_.params_staged;
}

bool Exchanger::overlaps_pulls() const {
  return options_.overlaps_pulls();
}

void Exchanger::ParamsNeeded(int64_t offset, int64_t count) {
  if (!pending_pull_.has_value() || count <= 0 || pending_pull_->Done()) return;
  const auto [first, last] = ps_->layout().KeysCovering(offset, count);
  const absl::Time start = absl::Now();
  // An error stops nothing here: FinishPull reports it before the gradient is pushed.
  pending_pull_->WaitKeys(first, last).IgnoreError();
  stall_ += absl::Now() - start;
}

absl::Status Exchanger::FinishPull() {
  if (!pending_pull_.has_value()) return absl::OkStatus();
  const absl::Time start = absl::Now();
  const absl::Status status = pending_pull_->Wait();
  stall_ += absl::Now() - start;
  // Parked time the compute did not hide is the mode's wait (bsp's barrier, ssp's bound).
  stall_parked_seconds_ =
      std::min(pending_pull_->waited_seconds(), absl::ToDoubleSeconds(stall_));
  if (log_ != nullptr) {
    log_->Span("pull", pull_sent_, pending_pull_->finished(),
               absl::StrCat("{\"overlapped\": true, \"stall_ms\": ",
                            absl::ToDoubleMilliseconds(stall_), "}"));
  }
  pending_pull_.reset();
  return status;
}

void Exchanger::BeginCompute(const ComputeStart& start) {
  scheduler_->NoteProgress();
  if (options_.density_warmup_epochs > 0) {
    ps_->set_push_density(codec::WarmupDensity(options_.push_density, start.epochs_done,
                                               options_.density_warmup_epochs));
  }
  // Early pushes carry the batch asked for (a workload computes fewer samples only when a
  // fixed-batch shard runs out, which steps_per_epoch prevents).
  if (pusher_ != nullptr) {
    std::optional<PullAfterPush> pull;
    if (pulls_follow_pushes() && start.params != nullptr) {
      pull = PullAfterPush{start.params,
                           PullFor(start.clock, start.batch, start.evaluation_next)};
    }
    pusher_->Start(start.clock, PushScale(start.batch), /*gated=*/early_slot_ != nullptr, pull);
  }
  if (early_slot_ != nullptr) {
    SlotReport previous = previous_;
    previous.iterations_left = start.iterations_left;
    early_slot_->Begin(absl::Now(), previous);
  }
}

void Exchanger::GradientReady(HostGradient grads, int64_t offset, int64_t count) {
  // A pull that follows a push must not race the last iteration's pull of that partition:
  // once backward reports, the forward has waited for what it read, and the rest is waited for
  // here (pull time, as in ParamsNeeded; FinishPull then reports its outcome).
  if (pulls_follow_pushes() && pending_pull_.has_value() && !pending_pull_->Done()) {
    const absl::Time start = absl::Now();
    pending_pull_->Wait().IgnoreError();
    stall_ += absl::Now() - start;
  }
  pusher_->Ready(grads, offset, count);
}

absl::StatusOr<proto::SlotGrant> Exchanger::AwaitSlot(const ExchangeStep& step,
                                                      const IterationMetrics& m,
                                                      absl::Time* granted) {
  const SlotReport current{m.batch, m.compute_seconds, previous_.comm_seconds,
                           step.iterations_left};
  if (early_slot_ == nullptr) {
    absl::StatusOr<proto::SlotGrant> grant = scheduler_->RequestSlot(
        current.samples, current.compute_seconds, current.comm_seconds, current.iterations_left);
    *granted = absl::Now();
    return grant;
  }
  pusher_->BackwardEnded();
  absl::StatusOr<proto::SlotGrant> grant = early_slot_->Await(current, granted);
  // Granted during backward: no wait after compute.
  *granted = std::max(*granted, step.computed);
  return grant;
}

absl::Status Exchanger::Push(const ExchangeStep& step, IterationMetrics* m, absl::Time now,
                             absl::Time* started, std::optional<Ticket>* pull) {
  *started = now;
  if (pusher_ != nullptr && pusher_->started()) {
    const absl::Status status = pusher_->Finish(step.grads);
    m->early_partitions = pusher_->early_partitions();
    if (m->early_partitions > 0) *started = pusher_->first_push();
    *pull = pusher_->pulls();
    // On failure the caller returns: no pull may still be writing the parameters then.
    if (!status.ok() && pull->has_value()) (*pull)->Wait().IgnoreError();
    return status;
  }
  if (options_.early_pulls) {
    PsClient::Exchange exchange =
        ps_->PushThenPull(step.grads, m->clock, PushScale(m->batch), step.params,
                          PullFor(m->clock, m->batch, step.evaluation_next));
    const absl::Status status = exchange.push.Wait();
    // On failure the caller returns: no pull may still be writing the parameters then.
    if (!status.ok()) exchange.pull.Wait().IgnoreError();
    *pull = std::move(exchange.pull);
    return status;
  }
  return ps_->Push(step.grads, m->clock, /*init=*/false, PushScale(m->batch)).Wait();
}

float Exchanger::PushScale(int batch) const {
  // BSP sums weighted gradients with hetero batching (else averages them); asynchronous modes
  // apply each push as its fraction of a global-batch step.
  const bool weighted = options_.hetero_batching || options_.sync != proto::BSP;
  if (!weighted || global_batch_ <= 0) return 0.0f;
  return std::min(1.0f, static_cast<float>(batch) / global_batch_);
}

void Exchanger::SetLiveWorkers(int workers) {
  if (options_.hetero_batching || options_.global_batch <= 0 || workers < 1) return;
  global_batch_ = options_.initial_batch * workers;
  workers_ = workers;
}

PullOptions Exchanger::PullFor(int64_t clock, int batch, bool evaluation_next) const {
  PullOptions pull;
  pull.codec = options_.pull_codec;
  pull.min_version = options_.sync == proto::BSP ? clock + 1 : 0;
  pull.min_clock =
      options_.sync == proto::SSP ? std::max<int64_t>(0, clock + 1 - options_.staleness) : 0;
  if (options_.lookahead && options_.sync == proto::R2SP && workers_ > 1 && !evaluation_next) {
    // The other workers' pushes land before ours: (B - b_i) / B of a step, where b_i is this
    // worker's next batch (known with fixed batches; the current one estimates it with hetero
    // batching).
    pull.predict_fraction =
        1.0f - std::min(1.0f, static_cast<float>(batch) / std::max(1, global_batch_));
    pull.predict_updates = pull.predict_fraction > 0.0f ? workers_ - 1 : 0;
  }
  return pull;
}

absl::StatusOr<const float*> Exchanger::EvaluationParams(const float* params) {
  if (elastic_ == nullptr) return params;
  return elastic_->PullCentre();
}

float Exchanger::DifferenceWeight(int batch) const {
  if (!options_.hetero_batching || global_batch_ <= 0) return 1.0f;
  // b_i over the mean batch B / W of the job's W workers: the centre's pulls still add up to
  // W times alpha (EASGD's beta) whatever the tuner's split, also after a death.
  return static_cast<float>(static_cast<double>(batch) * options_.workers / global_batch_);
}

absl::Status Exchanger::ExchangeElastic(const ExchangeStep& step, IterationMetrics* m) {
  R2SP_ASSIGN_OR_RETURN(const ElasticStepTimes t,
                        elastic_->Step(m->clock, step.grads, step.params, PushScale(m->batch),
                                       DifferenceWeight(m->batch)));
  scheduler_->NoteProgress();
  if (t.exchanged) {
    const uint64_t bytes = ps_->layout().total_bytes();
    m->push_bytes = m->pull_bytes = bytes;
    m->parked_seconds = m->wait_seconds = t.parked_seconds;
    m->pull_seconds = absl::ToDoubleSeconds(t.pull_done - t.pull_started);
    m->push_seconds = absl::ToDoubleSeconds(t.push_done - t.pull_done);
    // The tuner's fixed cost per iteration: one exchange spread over its period.
    previous_.comm_seconds = m->CommSeconds() / std::max(1, options_.elastic.period);
    if (log_ != nullptr) {
      log_->Span("pull", t.pull_started, t.pull_done,
                 absl::StrCat("{\"parked_ms\": ", t.parked_seconds * 1e3, ", \"centre\": true}"));
      log_->Span("push", t.pull_done, t.push_done, "{\"elastic\": true}");
    }
  }
  if (options_.hetero_batching) {
    scheduler_->Report(m->batch, m->compute_seconds, previous_.comm_seconds, step.iterations_left,
                       [next = next_batch_](int b) { *next = b; });
  }
  return absl::OkStatus();
}

absl::Status Exchanger::Exchange(const ExchangeStep& step, IterationMetrics* m) {
  if (elastic_ != nullptr) return ExchangeElastic(step, m);
  const bool r2sp = options_.sync == proto::R2SP;
  const bool last = step.iterations_left == 1;
  R2SP_RETURN_IF_ERROR_WITH(FinishPull(), "pull");
  const absl::Duration earlier_pull = stall_;
  const double earlier_parked = stall_parked_seconds_;
  stall_ = absl::ZeroDuration();
  stall_parked_seconds_ = 0;
  absl::Time granted = step.computed;
  if (r2sp) {
    R2SP_ASSIGN_OR_RETURN(proto::SlotGrant grant,
                          WithContext(AwaitSlot(step, *m, &granted), "waiting for a slot"));
    m->gap_seconds = grant.gap_seconds();
    if (options_.hetero_batching && grant.batch().batch_size() > 0) {
      *next_batch_ = grant.batch().batch_size();
    }
    if (log_ != nullptr) {
      log_->Span("wait", step.computed, granted,
                 absl::StrCat("{\"gap_ms\": ", m->gap_seconds * 1e3, ", \"grant\": ",
                              grant.grant_index(), ", \"granted_us\": ", grant.granted_unix_us(),
                              "}"));
    }
  }
  absl::Time push_started;
  std::optional<Ticket> early_pull;
  R2SP_RETURN_IF_ERROR_WITH(Push(step, m, granted, &push_started, &early_pull), "push");
  const absl::Time after_push = absl::Now();
  scheduler_->NoteProgress();
  // The last slot takes the worker out of the ring, so workers with more steps to go (one that
  // joined late, say) do not wait for its turn.
  if (r2sp && !options_.slot_includes_pull) scheduler_->ReleaseSlot(/*leaving=*/last);
  Ticket pull = early_pull.has_value()
                    ? *early_pull
                    : ps_->Pull(step.params, PullFor(m->clock, m->batch, step.evaluation_next));
  m->pull_overlapped = overlaps_pulls() && step.forward_waits && !step.evaluation_next && !last;
  double parked = earlier_parked;
  if (m->pull_overlapped) {
    pending_pull_ = pull;
    pull_sent_ = after_push;
  } else {
    R2SP_RETURN_IF_ERROR_WITH(pull.Wait(), "pull");
    parked += pull.waited_seconds();
  }
  const absl::Time after_pull = absl::Now();
  scheduler_->NoteProgress();
  if (r2sp && options_.slot_includes_pull) scheduler_->ReleaseSlot(/*leaving=*/last);

  const uint64_t bytes = ps_->layout().total_bytes();
  m->wait_seconds = absl::ToDoubleSeconds(granted - step.computed) + parked;
  m->push_seconds = absl::ToDoubleSeconds(after_push - granted);
  m->pull_seconds = absl::ToDoubleSeconds(after_pull - after_push + earlier_pull);
  m->parked_seconds = parked;
  m->push_bytes = m->pull_bytes = bytes;
  if (log_ != nullptr) {
    log_->Span("push", push_started, after_push,
               push_started < granted ? "{\"overlapped\": true}" : "");
    if (!m->pull_overlapped) {
      log_->Span("pull", after_push, after_pull,
                 absl::StrCat("{\"parked_ms\": ", pull.waited_seconds() * 1e3, "}"));
    }
  }
  // The tuner's fixed per-iteration cost: communication, which does not shrink with the batch.
  previous_ = SlotReport{m->batch, m->compute_seconds, m->CommSeconds(), 0};
  if (early_slot_ != nullptr) {
    // From BeginCompute to the end of compute: what the next early ask is timed by.
    early_slot_->Record(m->compute_seconds + absl::ToDoubleSeconds(earlier_pull), after_push,
                        !pusher_->complete_when_opened());
  }
  if (options_.hetero_batching && !r2sp) {
    scheduler_->Report(m->batch, m->compute_seconds, previous_.comm_seconds, step.iterations_left,
                       [next = next_batch_](int b) { *next = b; });
  }
  return absl::OkStatus();
}

}  // namespace r2sp
