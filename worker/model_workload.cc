// See model_workload.h.
#include "worker/model_workload.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "models/model_file.h"

namespace r2sp {

absl::StatusOr<models::TrainTest> LoadWorkerData(const std::string& name,
                                                 const std::string& dir) {
  std::string from = dir;
  if (from.empty() && name == "fashion-mnist") from = models::kDebianFashionMnistDir;
  if (from.empty()) return absl::InvalidArgumentError("--data_dir is required for --data=" + name);
  return models::LoadDataset(name, from);
}

absl::StatusOr<models::EvalResult> EvaluateDataset(models::Network* net,
                                                   const models::Dataset& data,
                                                   const float* params, int eval_batch,
                                                   const std::function<void()>& each_batch) {
  models::EvalResult total;
  std::vector<float> images(static_cast<size_t>(eval_batch) * data.shape.size());
  std::vector<int32_t> labels(eval_batch);
  for (int64_t start = 0; start < data.size(); start += eval_batch) {
    const int n = static_cast<int>(std::min<int64_t>(eval_batch, data.size() - start));
    for (int i = 0; i < n; ++i) {
      models::Batcher::Normalise(data, start + i, nullptr, images.data() + i * data.shape.size());
      labels[i] = data.labels[start + i];
    }
    R2SP_ASSIGN_OR_RETURN(models::EvalResult r,
                          net->Evaluate(params, images.data(), labels.data(), n));
    total.correct += r.correct;
    total.loss_sum += r.loss_sum;
    if (each_batch) each_batch();
  }
  return total;
}

ModelWorkload::ModelWorkload(const ModelWorkloadOptions& options, models::Network* net,
                             models::Batcher* batcher, const models::Dataset* test)
    : options_(options),
      net_(net),
      batcher_(batcher),
      test_(test),
      images_(static_cast<size_t>(options.largest_batch) * net->graph().input.size()),
      labels_(options.largest_batch),
      grads_(net->graph().num_parameters()) {
  if (options.fp16_gradients) {
    half_grads_.resize(grads_.size());
    if (!net_->set_fp16_gradients(half_grads_.data())) {
      half_grads_ = decltype(half_grads_)();  // freed
      LOG(INFO) << "this backend gives fp32 gradients; the pushes encode them to fp16";
    }
  }
  // Backward's copies land straight in the pushes' source at the bus's speed.
  absl::StatusOr<std::unique_ptr<models::PinnedHostMemory>> pin =
      half_grads_.empty()
          ? net_->PinHostMemory(grads_.data(), grads_.size() * sizeof(float))
          : net_->PinHostMemory(half_grads_.data(), half_grads_.size() * sizeof(uint16_t));
  if (pin.ok()) {
    grads_pin_ = *std::move(pin);
  } else {
    LOG(WARNING) << "gradients stay in pageable memory (slower device copies): " << pin.status();
  }
}

ModelWorkload::~ModelWorkload() { net_->set_fp16_gradients(nullptr); }

HostGradient ModelWorkload::Gradient() const {
  return half_grads_.empty() ? HostGradient(grads_.data())
                             : HostGradient::Fp16(half_grads_.data());
}

void ModelWorkload::set_gradient_ready(GradientReady fn) {
  if (!fn) {
    net_->set_gradient_ready(nullptr);
    return;
  }
  net_->set_gradient_ready([fn = std::move(fn), grads = Gradient()](int64_t offset,
                                                                     int64_t count) {
    fn(grads, offset, count);
  });
}

void ModelWorkload::StartEpoch(int epoch, int64_t /*steps*/) {
  epoch_ = epoch;
  // Wrapping batches reshuffle when the shard runs out, not at epoch boundaries.
  if (!options_.wrapping_batches) batcher_->StartEpoch(epoch);
}

void ModelWorkload::SkipSteps(int64_t steps, int batch) {
  batch = std::clamp(batch, 1, options_.largest_batch);
  batcher_->Skip(steps * batch, options_.wrapping_batches);
}

absl::StatusOr<ComputedStep> ModelWorkload::ComputeGradient(int64_t clock, int batch,
                                                            const float* params) {
  batch = std::clamp(batch, 1, options_.largest_batch);
  const int n = options_.wrapping_batches
                    ? batcher_->NextWrapping(batch, images_.data(), labels_.data())
                    : batcher_->Next(batch, images_.data(), labels_.data());
  if (n == 0) {
    return absl::InternalError(
        absl::StrCat("worker ", options_.rank, "'s shard ran out at iteration ", clock));
  }
  steps_done_ = clock + 1;
  ComputedStep step;
  step.samples = n;
  R2SP_ASSIGN_OR_RETURN(step.loss,
                        net_->TrainStep(params, images_.data(), labels_.data(), n, grads_.data()));
  step.grads = Gradient();
  for (const models::DeviceSpan& d : net_->LastStepDeviceSpans()) {
    step.device_spans.push_back({d.name, d.begin_seconds, d.end_seconds});
  }
  return step;
}

absl::StatusOr<std::optional<TestEvaluation>> ModelWorkload::EvaluateTest(
    const float* params) {
  R2SP_ASSIGN_OR_RETURN(models::EvalResult r,
                        EvaluateDataset(net_, *test_, params, options_.eval_batch,
                                        options_.evaluation_progress));
  TestEvaluation e;
  e.accuracy = static_cast<double>(r.correct) / test_->size();
  e.loss = r.loss_sum / test_->size();
  if (!options_.model_dir.empty()) ExportModel(params, e);
  return e;
}

void ModelWorkload::ExportModel(const float* params, const TestEvaluation& evaluation) {
  proto::ModelFile model =
      models::MakeModelFile(net_->graph(), params, net_->BatchNormStatistics());
  model.set_step(steps_done_);
  model.set_epoch(epoch_ + 1);
  model.set_test_accuracy(evaluation.accuracy);
  model.set_test_loss(evaluation.loss);
  model.set_data(options_.data);
  absl::StatusOr<std::string> path =
      models::WriteModelFile(options_.model_dir, model, options_.keep_models);
  if (!path.ok()) {
    LOG(ERROR) << "worker " << options_.rank << ": cannot write the model file: "
               << path.status();
  }
}

}  // namespace r2sp
