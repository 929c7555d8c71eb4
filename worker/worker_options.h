// WorkerOptions: the worker binary's options, the session's (session_options.h) and its own
// trainer's (the model and its data set, the backend, the batcher, the workloads), with
// Validate(), which the worker binary, tests and benchmarks go through. worker/main.cc fills it
// from flags (worker_flags.h).
#ifndef R2SP_WORKER_WORKER_OPTIONS_H_
#define R2SP_WORKER_WORKER_OPTIONS_H_

#include <string>

#include "absl/status/status.h"
#include "models/backend.h"
#include "models/data/batcher.h"
#include "worker/model_workload.h"
#include "worker/session_options.h"
#include "worker/synthetic_workload.h"

namespace r2sp {

// The worker binary's defaults where they differ from the parts' own (its flags' defaults).
models::BatcherOptions WorkerBatcherDefaults();  // augment (cifar10)
ModelWorkloadOptions WorkerWorkloadDefaults();   // fp16_gradients (--encode_on_device)

// Each field's flag is named in worker/main_flags.cc; the defaults are the worker binary's.
// `model` (SessionOptions) is the model the worker builds. REQUIRES: mlp, cnn, resnet20 or
// synthetic, unless external_model.
struct WorkerOptions : SessionOptions {
  // Real models.
  std::string data = "fashion-mnist";
  std::string data_dir;
  // Worker 0 starts the job from this model file (--init=checkpoint:PATH). REQUIRES: a real
  // model.
  std::string init_model_path;
  // The synthetic model. REQUIRES: model_mb in (0, 16384], layers in [1, 10000], and (the
  // synthetic model) model_mb large enough for a 64-float bias per layer; iterations >= 0.
  double model_mb = 16;
  int layers = 8;
  int iterations = 100;
  // Synthetic workers as threads of this process, each a whole worker of its own (connections,
  // registration, rank, heartbeats, FINISH); their metrics, timeline and dump files get "_tK"
  // before the extension (thread K). REQUIRES: >= 1; > 1 only with the synthetic model.
  int workers_per_process = 1;

  bool random_init = true;  // false: zeros (ignored with init_model_path)

  // The trainer's parts (the seeds come from `seed`):
  models::BackendOptions backend;  // device (cpu, or cuda in a CUDA build), threads, gpu (>= 0)
  models::BatcherOptions batcher = WorkerBatcherDefaults();  // augment (cifar10 only)
  // model_dir, keep_models (>= 1); fp16_gradients: encode on the device with an fp16 push codec.
  ModelWorkloadOptions workload = WorkerWorkloadDefaults();
  SyntheticOptions synthetic;  // known_gradients, compute_ms (>= 0)

  bool is_synthetic() const { return model == "synthetic"; }
  // OK, or InvalidArgument naming the first field (and its flag) that breaks a REQUIRES: the
  // session's fields first (SessionOptions::Validate, named as WorkerOptions' here), then the
  // trainer's.
  absl::Status Validate() const;
};

}  // namespace r2sp

#endif  // R2SP_WORKER_WORKER_OPTIONS_H_
