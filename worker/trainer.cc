// See trainer.h.
#include "worker/trainer.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "glog/logging.h"

namespace r2sp {

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
                                  PsClient* ps, models::Batcher* batcher,
                                  const models::Dataset* test, std::vector<float>* params) {
  const models::Graph& g = net->graph();
  const int batch = options.batch_size;
  std::vector<float> images(static_cast<size_t>(batch) * g.input.size());
  std::vector<int32_t> labels(batch);
  std::vector<float> grads(params->size());
  TrainResult result;
  const absl::Time start = absl::Now();
  absl::Time window_start = start;
  int64_t window_samples = 0;
  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    batcher->StartEpoch(epoch);
    double epoch_loss = 0;
    int64_t epoch_steps = 0;
    for (int64_t s = 0; s < options.steps_per_epoch; ++s) {
      if (options.max_steps > 0 && result.steps >= options.max_steps) break;
      const int n = batcher->Next(batch, images.data(), labels.data());
      if (n == 0) {
        return absl::InternalError(absl::StrCat("worker ", options.rank, "'s shard ran out at step ",
                                                s, " of ", options.steps_per_epoch));
      }
      const absl::Time t0 = absl::Now();
      absl::StatusOr<float> loss =
          net->TrainStep(params->data(), images.data(), labels.data(), n, grads.data());
      if (!loss.ok()) return loss.status();
      const absl::Time t1 = absl::Now();
      const int64_t clock = result.steps;
      absl::Status pushed = ps->Push(grads.data(), clock).Wait();
      if (!pushed.ok()) return absl::Status(pushed.code(), absl::StrCat("push: ", pushed.message()));
      absl::Status pulled = ps->Pull(params->data(), options.bsp ? clock + 1 : 0).Wait();
      if (!pulled.ok()) return absl::Status(pulled.code(), absl::StrCat("pull: ", pulled.message()));
      result.compute_seconds += absl::ToDoubleSeconds(t1 - t0);
      result.comm_seconds += absl::ToDoubleSeconds(absl::Now() - t1);
      ++result.steps;
      result.samples += n;
      window_samples += n;
      epoch_loss += *loss;
      ++epoch_steps;
      if (options.log_every > 0 && result.steps % options.log_every == 0) {
        const absl::Time now = absl::Now();
        std::printf("worker %d: epoch %d step %lld/%lld loss %.4f %.0f samples/s\n", options.rank,
                    epoch + 1, static_cast<long long>(s + 1),
                    static_cast<long long>(options.steps_per_epoch), *loss,
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
