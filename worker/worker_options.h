// WorkerOptions: a worker's options, nesting those of the parts it wires together (the
// parameter-server client, the exchanger, the training loop, the backend, the batcher, the
// workloads), with Validate(), which the worker binary, tests and benchmarks go through
// (WorkerNode::Run returns its error). worker/main.cc fills it from flags.
#ifndef R2SP_WORKER_WORKER_OPTIONS_H_
#define R2SP_WORKER_WORKER_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/node_connection.h"
#include "models/backend.h"
#include "models/data/batcher.h"
#include "proto/messages.pb.h"
#include "worker/exchanger.h"
#include "worker/model_workload.h"
#include "worker/ps_client.h"
#include "worker/synthetic_workload.h"
#include "worker/training_loop.h"

namespace r2sp {

// The worker binary's defaults where they differ from the parts' own (its flags' defaults).
PsClientOptions WorkerPsDefaults();              // dense_below 16384
ExchangerOptions WorkerExchangeDefaults();       // lookahead, overlap_pulls
models::BatcherOptions WorkerBatcherDefaults();  // augment (cifar10)
ModelWorkloadOptions WorkerWorkloadDefaults();   // fp16_gradients (--encode_on_device)

// Each field's flag is named in worker/main.cc; the defaults are the worker binary's.
struct WorkerOptions {
  NodeConnectionOptions connection;
  std::string model = "synthetic";  // REQUIRES: mlp, cnn, resnet20 or synthetic
  // The model is the caller's (WorkerNode's ExternalModel: the Python client's); `model` then
  // only names it in the job's reports. REQUIRES (then): model not empty, not "synthetic".
  bool external_model = false;

  // Real models.
  std::string data = "fashion-mnist";
  std::string data_dir;
  int batch_size = 64;  // samples per step without hetero batching. REQUIRES: in [1, 65536]
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
  // Initial parameters, shuffling (batcher.seed), dropout (backend.seed = seed + rank) and the
  // synthetic workload's random gradients (synthetic.seed).
  uint64_t seed = 1;
  std::string dump_params_path;  // after training, the final parameters (raw fp32); empty: no
  std::string metrics_path;      // per-iteration metrics, JSON lines (run_log.h); empty: none
  std::string timeline_path;     // a Chrome-trace timeline (run_log.h); empty: none
  int log_every = 0;             // 0: 10 synthetic, 50 real. REQUIRES: >= 0

  // The parts' options. WorkerNode sets the fields the job decides (ranks, world sizes, the
  // mode, batch sizes, seeds) from the scheduler's address book and the fields above; the
  // others come from here:
  // epochs (>= 1), max_steps (>= 0), eval_every (>= 0): real models; compute_slowdown (in
  // [1, 100]), emulate_ms_per_sample (in [0, 1000]).
  LoopOptions loop;
  models::BackendOptions backend;  // device (cpu, or cuda in a CUDA build), threads, gpu (>= 0)
  models::BatcherOptions batcher = WorkerBatcherDefaults();  // augment (cifar10 only)
  // request_timeout (>= 1 s), push_codec (not fp16_delta), error_feedback,
  // momentum_correction (in [0, 1)), dense_below.
  PsClientOptions ps = WorkerPsDefaults();
  // lookahead (real models), pull_codec (fp32, fp16 or fp16_delta), overlap, overlap_pulls,
  // bucket_bytes, early_pulls (with overlap only if params_staged), early_pulls_in_flight
  // (>= 0), density_warmup_epochs (>= 0; sparse codecs).
  ExchangerOptions exchange = WorkerExchangeDefaults();
  // model_dir, keep_models (>= 1); fp16_gradients: encode on the device with an fp16 push codec.
  ModelWorkloadOptions workload = WorkerWorkloadDefaults();
  SyntheticOptions synthetic;  // known_gradients, compute_ms (>= 0)

  bool is_synthetic() const { return model == "synthetic"; }
  // OK, or InvalidArgument naming the first field (and its flag) that breaks a REQUIRES, the
  // connection's included.
  absl::Status Validate() const;
};

// The exchanger's options for a job: the address book's mode (sync, staleness, slot width,
// workers, the push codec's density) over `options.exchange`; the real models' fields
// (lookahead, hetero batching, batch sizes) cleared for the worker to set.
ExchangerOptions JobExchangerOptions(const WorkerOptions& options, const proto::AddressBook& book);

// OK, or InvalidArgument saying which of the worker's options the job's mode cannot run with
// (easgd, eawild: sparse push codecs, fp16_delta pulls, --overlap, --early_pulls). Every worker
// checks it once registration told it the mode.
absl::Status CheckJobMode(const WorkerOptions& options, const proto::AddressBook& book);

}  // namespace r2sp

#endif  // R2SP_WORKER_WORKER_OPTIONS_H_
