// A worker's life in the job: load what it trains (its tensors decide what it registers),
// join (register, the model layout, the clients, heartbeats), initialise (rank 0 pushes the
// initial parameters between the ALL and WORKERS barriers; every worker pulls them), train
// (training_loop.h over a ModelWorkload, the SyntheticWorkload, or an ExternalModel's
// HandoffWorkload: the Python client's), and finish (the final barrier, after which every push
// is applied; the final pull; FINISH with the counters).
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
#include "worker/epoch_planner.h"
#include "worker/evaluator_role.h"
#include "worker/exchanger.h"
#include "worker/final_sync.h"
#include "worker/handoff_workload.h"
#include "worker/leave_flag.h"
#include "worker/server_follower.h"
#include "worker/training_loop.h"
#include "worker/worker_options.h"

namespace r2sp {

// A model trained by code outside the worker (the Python client, worker/python/): its tensors,
// the buffer of its parameters (the model's size; rank 0's hold the job's initial values when
// Run starts, and every pull lands there), and the workload its steps come through (Joined
// tells it what the job decided; its AwaitStart, the training set's size). Borrowed: they must
// outlive the node. WorkerOptions::external_model must be set.
struct ExternalModel {
  std::vector<proto::TensorSpec> tensors;
  float* params = nullptr;
  HandoffWorkload* workload = nullptr;
};

// Thread-compatible: one thread calls Run(); the transport's I/O thread and the heartbeat
// thread work inside it. Cancel() may come from any thread.
class WorkerNode {
 public:
  // Called once, on the heartbeat or the I/O thread, when this worker can no longer be part of
  // the job (it lost the scheduler, was declared dead, or the job failed), with Aborted(why).
  // Nothing the worker does afterwards counts: the worker binary's main exits there (status 3).
  using LostHandler = std::function<void(const absl::Status&)>;

  // `on_lost` may be empty (then Run() returns the Aborted error once training fails).
  explicit WorkerNode(WorkerOptions options, LostHandler on_lost = nullptr,
                      std::optional<ExternalModel> external = std::nullopt);
  ~WorkerNode();

  // The whole life; an error says which phase failed (first: options_.Validate()'s). After the
  // worker was lost to the job, the Aborted error that said why.
  absl::Status Run();

  // Stops the node's communication (heartbeats, the transport) from any thread: whatever Run
  // waits for fails at once, and Run returns an error. Idempotent.
  void Cancel() ABSL_LOCKS_EXCLUDED(cancel_mu_);

  // Asks the node, from any thread (a SIGTERM's), to leave the job after its current training
  // step: it tells the scheduler (LEAVE, with `why`), which counts it dead at once, and Run
  // returns OK with left() true. Before training starts or once it is over, nothing changes.
  void RequestLeave(const std::string& why) { leave_.Request(why); }
  // Whether Run ended with the node leaving the job (RequestLeave).
  bool left() const { return leave_.left(); }

 private:
  bool synthetic() const { return options_.is_synthetic(); }
  void Lost(const std::string& why) ABSL_LOCKS_EXCLUDED(lost_mu_);
  absl::Status LoadModel();
  absl::Status Join();
  // Everything after Join.
  absl::Status TrainAndFinish();
  absl::Status InitialiseParameters();
  absl::StatusOr<LoopResult> Train();
  // The parameters: the external model's buffer, or params_.
  float* params() { return external_ ? external_->params : params_.data(); }
  // The data set's shards: one per initial worker (the registration's data_world).
  int DataWorld() const;
  // The data set's shards and this worker's (real and external models).
  absl::StatusOr<std::pair<int, int>> DataShard() const;
  // The batch sizes and B into `mode`, the steps of an epoch of `train_samples` into `loop`, from
  // the job's hetero batching or --batch_size; returns the largest batch a step may have.
  int SizeBatches(int64_t train_samples, int world, ExchangerOptions* mode,
                  LoopOptions* loop) const;
  // The external model's training (its HandoffWorkload's steps).
  absl::StatusOr<LoopResult> TrainExternal(LoopOptions loop, ExchangerOptions mode,
                                           RunLog* log);
  // What the job decided, for the external model's workload.
  JoinedJob JoinedJobInfo() const;
  // The epoch planner's options (epoch_planner.h) for this worker's shard.
  EpochPlannerOptions PlannerOptions(int world, int shard, const ExchangerOptions& mode,
                                     const LoopOptions& loop, int64_t train_samples) const;
  absl::StatusOr<LoopResult> TrainModel(const LoopOptions& loop, ExchangerOptions mode,
                                        RunLog* log);
  absl::Status Finish(const LoopResult& result);
  // Training ended early (RequestLeave): LEAVE with the counters so far, and stop.
  absl::Status Leave(const LoopResult& result);

  const WorkerOptions options_;
  const LostHandler on_lost_;
  const std::optional<ExternalModel> external_;
  std::vector<proto::TensorSpec> tensors_;
  std::optional<models::TrainTest> data_;  // real models only
  std::optional<models::Graph> graph_;
  absl::Mutex cancel_mu_;  // Cancel against Join's creation of the two below
  bool cancelled_ ABSL_GUARDED_BY(cancel_mu_) = false;
  std::unique_ptr<Transport> transport_;  // set under cancel_mu_
  std::unique_ptr<SchedulerClient> scheduler_;  // set under cancel_mu_
  proto::RegisterReply registration_;
  std::optional<ModelLayout> layout_;
  std::unique_ptr<PsClient> ps_;
  std::unique_ptr<ServerFollower> server_follower_;  // heartbeat news of lost servers
  std::unique_ptr<EvaluatorRole> evaluator_;  // heartbeat news of dead workers
  std::unique_ptr<FinalSync> final_sync_;      // the final barrier and pull
  models::HostArray params_;  // page-aligned: pinned for GPU copies
  int64_t first_step_ = 0;  // > 0: the job resumed from the servers' checkpoints
  LeaveFlag leave_;
  mutable absl::Mutex lost_mu_;
  absl::Status lost_ ABSL_GUARDED_BY(lost_mu_);  // Aborted(why) once lost to the job
};

}  // namespace r2sp

#endif  // R2SP_WORKER_WORKER_NODE_H_
