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
#include "absl/synchronization/mutex.h"
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
#include "worker/worker_options.h"

namespace r2sp {

// Thread-compatible: one thread calls Run(); the transport's I/O thread and the heartbeat
// thread work inside it.
class WorkerNode {
 public:
  // Called once, on the heartbeat or the I/O thread, when this worker can no longer be part of
  // the job (it lost the scheduler, was declared dead, or the job failed), with Aborted(why).
  // Nothing the worker does afterwards counts: the worker binary's main exits there (status 3).
  using LostHandler = std::function<void(const absl::Status&)>;

  // `on_lost` may be empty (then Run() returns the Aborted error once training fails).
  explicit WorkerNode(WorkerOptions options, LostHandler on_lost = nullptr);
  ~WorkerNode();

  // The whole life; an error says which phase failed (first: options_.Validate()'s). After the
  // worker was lost to the job, the Aborted error that said why.
  absl::Status Run();

 private:
  bool synthetic() const { return options_.is_synthetic(); }
  void Lost(const std::string& why) ABSL_LOCKS_EXCLUDED(lost_mu_);
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
  const LostHandler on_lost_;
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
  mutable absl::Mutex lost_mu_;
  absl::Status lost_ ABSL_GUARDED_BY(lost_mu_);  // Aborted(why) once lost to the job
};

}  // namespace r2sp

#endif  // R2SP_WORKER_WORKER_NODE_H_
