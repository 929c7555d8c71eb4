// See worker_options.h.
#include "worker/worker_options.h"

#include <cstddef>

#include "common/option_checker.h"

namespace r2sp {
namespace {

// What only one kind of model uses.
void CheckModel(const WorkerOptions& o, OptionChecker& c) {
  if (!o.external_model) {
    c.Check(o.model == "synthetic" || o.model == "mlp" || o.model == "cnn" ||
                o.model == "resnet20",
            "--model", "model", "mlp, cnn, resnet20 or synthetic", o.model);
  }
  c.Require(o.init_model_path.empty() || !o.is_synthetic(), "--init=checkpoint:",
            "init_model_path", "is for real models (--model=mlp, cnn or resnet20)");
  c.Check(o.model_mb > 0 && o.model_mb <= 16384, "--model_mb", "model_mb", "in (0, 16384]",
          o.model_mb);
  c.Check(o.layers >= 1 && o.layers <= 10000, "--layers", "layers", "in [1, 10000]", o.layers);
  if (o.is_synthetic()) {
    c.Check(static_cast<size_t>(o.model_mb * 1024 * 1024 / 4) >= 65u * o.layers, "--model_mb",
            "model_mb", "large enough for --layers (each layer has a 64-float bias)",
            o.model_mb);
  }
  c.Check(o.iterations >= 0, "--iterations", "iterations", ">= 0", o.iterations);
  c.Check(o.workers_per_process >= 1, "--workers_per_process", "workers_per_process", ">= 1",
          o.workers_per_process);
  c.Require(o.workers_per_process <= 1 || (o.is_synthetic() && !o.external_model),
            "--workers_per_process", "workers_per_process",
            "above 1 is for the synthetic model only (--model=synthetic): real models load "
            "their data and network once per process");
  c.Check(o.synthetic.compute_ms >= 0, "--compute_ms", "synthetic.compute_ms", ">= 0",
          o.synthetic.compute_ms);
}

void CheckCompute(const WorkerOptions& o, OptionChecker& c) {
  c.Check(o.backend.device == "cpu" || o.backend.device == "cuda", "--device", "backend.device",
          "cpu or cuda", o.backend.device);
  c.Require(o.backend.device != "cuda" || models::CudaAvailableInBuild(), "--device=cuda",
            "backend.device", "needs a worker built with CUDA (bazel build --config=cuda)");
  c.Check(o.backend.threads >= 0, "--threads", "backend.threads", ">= 0", o.backend.threads);
  c.Check(o.backend.gpu >= 0, "--gpu", "backend.gpu", ">= 0", o.backend.gpu);
  c.Check(o.workload.keep_models >= 1, "--keep_models", "workload.keep_models", ">= 1",
          o.workload.keep_models);
}

}  // namespace

models::BatcherOptions WorkerBatcherDefaults() {
  models::BatcherOptions options;
  options.augment = true;
  return options;
}

ModelWorkloadOptions WorkerWorkloadDefaults() {
  ModelWorkloadOptions options;
  options.fp16_gradients = true;
  return options;
}

absl::Status WorkerOptions::Validate() const {
  OptionChecker c("WorkerOptions");
  CheckSessionFields(c);
  CheckModel(*this, c);
  CheckCompute(*this, c);
  return c.status();
}

}  // namespace r2sp
