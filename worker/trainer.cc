// See trainer.h.
#include "worker/trainer.h"

#include <atomic>
#include <memory>
#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "glog/logging.h"
#include "worker/exchange.h"

namespace r2sp {
namespace {

}  // namespace

absl::StatusOr<models::EvalResult> EvaluateAll(models::Network* net, const models::Dataset& data,
                                               const float* params, int eval_batch) {
  models::EvalResult total;
  std::vector<float> images(static_cast<size_t>(eval_batch) * data.shape.size());
  std::vector<int32_t> labels(eval_batch);
  for (int64_t start = 0; start < data.size(); start += eval_batch) {
    const int n = static_cast<int>(std::min<int64_t>(eval_batch, data.size() - start));
    for (int i = 0; i < n; ++i) {
      models::Batcher::Normalise(data, start + i, nullptr, images.data() + i * data.shape.size());
      labels[i] = data.labels[start + i];
    }
    absl::StatusOr<models::EvalResult> r = net->Evaluate(params, images.data(), labels.data(), n);
    if (!r.ok()) return r.status();
    total.correct += r->correct;
    total.loss_sum += r->loss_sum;
  }
  return total;
}

absl::StatusOr<TrainResult> Train(const TrainerOptions& options, models::Network* net,
                                  PsClient* ps, SchedulerClient* scheduler,
                                  models::Batcher* batcher, const models::Dataset* test,
                                  std::vector<float>* params, RunLog* log) {
  const models::Graph& g = net->graph();
  const bool r2sp = options.mode.sync == proto::R2SP;
  const bool hetero = options.hetero_batching;
  // The batch size for the next iteration. Shared: a report's reply may arrive after we return.
  auto next_batch = std::make_shared<std::atomic<int>>(options.batch_size);
  const int largest_batch = hetero ? options.global_batch : options.batch_size;
  std::vector<float> images(static_cast<size_t>(largest_batch) * g.input.size());
  std::vector<int32_t> labels(largest_batch);
  std::vector<float> grads(params->size());
  double previous_comm_seconds = 0;
  TrainResult result;
  const absl::Time start = absl::Now();
  absl::Time window_start = start;
  int64_t window_samples = 0;
  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    if (!hetero) batcher->StartEpoch(epoch);
    double epoch_loss = 0;
    int64_t epoch_steps = 0;
    for (int64_t s = 0; s < options.steps_per_epoch; ++s) {
      if (options.max_steps > 0 && result.steps >= options.max_steps) break;
      const int batch = std::clamp(next_batch->load(), 1, largest_batch);
      const int n = hetero ? batcher->NextWrapping(batch, images.data(), labels.data())
                           : batcher->Next(batch, images.data(), labels.data());
      if (n == 0) {
        return absl::InternalError(absl::StrCat("worker ", options.rank, "'s shard ran out at step ",
                                                s, " of ", options.steps_per_epoch));
      }
      IterationMetrics m;
      m.clock = result.steps;
      m.epoch = epoch;
      m.batch = n;
      // Compute.
      const absl::Time t0 = absl::Now();
      absl::StatusOr<float> loss =
          net->TrainStep(params->data(), images.data(), labels.data(), n, grads.data());
      if (!loss.ok()) return loss.status();
      if (options.emulate_ms_per_sample > 0) {
        const absl::Duration target = absl::Milliseconds(options.emulate_ms_per_sample * n);
        const absl::Duration worked = absl::Now() - t0;
        if (worked < target) std::this_thread::sleep_for(absl::ToChronoNanoseconds(target - worked));
      }
      if (options.compute_slowdown > 1.0) {
        const absl::Duration worked = absl::Now() - t0;
        std::this_thread::sleep_for(absl::ToChronoNanoseconds(worked * (options.compute_slowdown - 1)));
      }
      const absl::Time t1 = absl::Now();
      m.compute_seconds = absl::ToDoubleSeconds(t1 - t0);
      m.loss = *loss;
      if (log) log->Span("compute", t0, t1, absl::StrCat("{\"batch\": ", n, "}"));
      const int64_t total = options.epochs * options.steps_per_epoch;
      const int64_t last = options.max_steps > 0 ? std::min(total, options.max_steps) : total;
      // b_i / B: BSP sums weighted gradients with hetero batching (else averages them);
      // asynchronous modes apply the push as that fraction of a global-batch step.
      const bool weighted = hetero || options.mode.sync != proto::BSP;
      const float scale =
          weighted ? std::min(1.0f, static_cast<float>(n) / options.global_batch) : 0.0f;
      const int64_t iterations_left = last - result.steps;  // this one included
      ExchangeOptions exchange = options.mode;
      exchange.previous_comm_seconds = previous_comm_seconds;
      exchange.iterations_left = iterations_left;
      const bool evaluate_next = options.evaluate && s + 1 == options.steps_per_epoch;
      if (options.lookahead && r2sp && options.workers > 1 && !evaluate_next) {
        // The other workers' pushes land before ours: (B - b_i) / B of a step, where b_i is
        // this worker's next batch (known with fixed batches; the current one estimates it
        // with hetero batching).
        exchange.predict_fraction =
            1.0f - std::min(1.0f, static_cast<float>(n) / std::max(1, options.global_batch));
        exchange.predict_updates = options.workers - 1;
        if (exchange.predict_fraction <= 0.0f) exchange.predict_updates = 0;
      }
      absl::StatusOr<int> assigned = Exchange(exchange, ps, scheduler, grads.data(),
                                              params->data(), scale, result.steps + 1 == last,
                                              t1, &m, log);
      if (!assigned.ok()) return assigned.status();
      if (hetero && *assigned > 0) *next_batch = *assigned;
      // The tuner's fixed per-iteration cost: communication, which does not shrink with the
      // batch.
      previous_comm_seconds = m.CommSeconds();
      if (hetero && !r2sp) {
        scheduler->Report(n, m.compute_seconds, previous_comm_seconds, iterations_left,
                          [next_batch](int b) { *next_batch = b; });
      }
      if (log) log->Metrics(m);
      result.compute_seconds += m.compute_seconds;
      result.wait_seconds += m.wait_seconds;
      result.comm_seconds += m.push_seconds + m.pull_seconds;
      ++result.steps;
      result.samples += n;
      result.final_batch = n;
      window_samples += n;
      epoch_loss += *loss;
      ++epoch_steps;
      if (options.log_every > 0 && result.steps % options.log_every == 0) {
        const absl::Time now = absl::Now();
        std::printf("worker %d: epoch %d step %lld/%lld loss %.4f batch %d %.0f samples/s\n",
                    options.rank, epoch + 1, static_cast<long long>(s + 1),
                    static_cast<long long>(options.steps_per_epoch), *loss, n,
                    window_samples / absl::ToDoubleSeconds(now - window_start));
        std::fflush(stdout);
        window_start = now;
        window_samples = 0;
      }
    }
    if (epoch_steps == 0) break;  // max_steps reached
    result.epochs = epoch + 1;
    result.last_epoch_loss = epoch_loss / epoch_steps;
    if (options.evaluate && test != nullptr) {
      absl::StatusOr<models::EvalResult> eval =
          EvaluateAll(net, *test, params->data(), options.eval_batch);
      if (!eval.ok()) return eval.status();
      result.test_accuracy = static_cast<double>(eval->correct) / test->size();
      std::printf("worker %d: epoch %d done: train loss %.4f, test accuracy %.4f (loss %.4f), "
                  "%.1f s\n",
                  options.rank, epoch + 1, result.last_epoch_loss, result.test_accuracy,
                  eval->loss_sum / test->size(), absl::ToDoubleSeconds(absl::Now() - start));
      std::fflush(stdout);
    }
  }
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return result;
}

}  // namespace r2sp
