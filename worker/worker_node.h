// A worker's life in the job: load what it trains (its tensors decide what it registers),
// join (register, the model layout, the clients, heartbeats), initialise (rank 0 pushes the
// initial parameters between the ALL and WORKERS barriers; every worker pulls them), train
// (training_loop.h over a ModelWorkload or the SyntheticWorkload), and finish (the final
// barrier, after which every push is applied; the final pull; FINISH with the counters).
#ifndef R2SP_WORKER_WORKER_NODE_H_
#define R2SP_WORKER_WORKER_NODE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/codec/codec_spec.h"
#include "common/model_layout.h"
#include "common/node_connection.h"
#include "common/scheduler_client.h"
#include "common/transport.h"
#include "models/data/batcher.h"
#include "models/data/dataset.h"
#include "models/graph.h"
#include "models/host_array.h"
#include "worker/ps_client.h"
#include "worker/run_log.h"
#include "worker/exchanger.h"
#include "worker/server_follower.h"
#include "worker/training_loop.h"

namespace r2sp {

// The worker's flags (worker/main.cc says what each means).
struct WorkerOptions {
  NodeConnectionOptions connection;
  std::string model = "synthetic";  // mlp, cnn, resnet20 or synthetic
  std::string data = "fashion-mnist";
  std::string data_dir;
  int batch_size = 64;
  int epochs = 1;
  int64_t max_steps = 0;
  std::string device = "cpu";
  int gpu = 0;
  int threads = 0;
  bool augment = true;
  bool lookahead = true;
  double compute_slowdown = 1.0;
  double emulate_ms_per_sample = 0.0;
  std::string metrics_path;
  std::string timeline_path;
  double model_mb = 16;  // synthetic
  int layers = 8;        // synthetic
  int iterations = 100;  // synthetic
  bool known_gradients = false;
  int compute_ms = 0;    // synthetic
  bool random_init = true;
  std::string init_model_path;  // --init=checkpoint:PATH: worker 0 starts from this model file
  std::string model_dir;        // the evaluating worker's model files
  int keep_models = 3;
  uint64_t seed = 1;
  std::string dump_params_path;
  codec::CodecSpec push_codec;  // training pushes (initial values go as fp32)
  bool encode_on_device = true;  // fp16 pushes: ModelWorkloadOptions::fp16_gradients
  bool error_feedback = true;   // sparse push codecs
  float momentum_correction = 0.0f;
  size_t dense_below = 0;  // PsClientOptions::dense_below
  double density_warmup_epochs = 0.0;
  bool overlap = false;  // push during backward (r2sp: ask for the slot before it ends)
  bool overlap_pulls = true;  // with overlap: pull while the next forward runs
  size_t bucket_bytes = 4 << 20;
  bool early_pulls = false;  // pull each partition once its push is acknowledged
  proto::Codec pull_codec = proto::FP32;  // training pulls (the first and final ones: fp32)
  int log_every = 0;     // 0: 10 synthetic, 50 real
  int eval_every = 0;    // real models: test evaluation every this many steps too (0: epochs)
  absl::Duration request_timeout = absl::Seconds(120);
};

class WorkerNode {
 public:
  explicit WorkerNode(WorkerOptions options);
  ~WorkerNode();

  // The whole life; an error says which phase failed.
  absl::Status Run();

 private:
  bool synthetic() const { return options_.model == "synthetic"; }
  absl::Status LoadModel();
  absl::Status Join();
  // Everything after Join.
  absl::Status TrainAndFinish();
  absl::Status InitialiseParameters();
  // --init=checkpoint:PATH into params_ (worker 0, before it initialises the servers).
  absl::Status LoadInitialModel();
  absl::StatusOr<LoopResult> Train();
  // LoopOptions.plan_epoch for a job whose survivors take over dead workers' data: asks the
  // scheduler for each epoch's plan, hands `batcher` this worker's samples for it and tells
  // `exchanger` how many workers it has; the epoch's steps are `fixed_steps` with tuned
  // batches (`batch` 0), else the fewest samples a live worker trains, in batches of `batch`.
  std::function<absl::StatusOr<int64_t>(int, bool)> EpochPlanner(
      int world, int shard, int batch, int64_t fixed_steps, models::Batcher* batcher,
      Exchanger* exchanger);
  absl::StatusOr<LoopResult> TrainModel(const LoopOptions& loop, ExchangerOptions mode,
                                        RunLog* log);
  absl::Status Finish(const LoopResult& result);

  const WorkerOptions options_;
  std::vector<proto::TensorSpec> tensors_;
  std::optional<models::TrainTest> data_;  // real models only
  std::optional<models::Graph> graph_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<SchedulerClient> scheduler_;
  proto::RegisterReply registration_;
  std::optional<ModelLayout> layout_;
  std::unique_ptr<PsClient> ps_;
  std::unique_ptr<ServerFollower> server_follower_;  // heartbeat news of lost servers
  models::HostArray params_;  // page-aligned: pinned for GPU copies
  int64_t first_step_ = 0;  // > 0: the job resumed from the servers' checkpoints
};

}  // namespace r2sp

#endif  // R2SP_WORKER_WORKER_NODE_H_
