// A worker's life in the job, whatever it trains: join (connect, register its tensors, the
// model layout, the parameter-server client, heartbeats), initialise (rank 0 pushes the initial
// parameters between the ALL and WORKERS barriers; every worker pulls them; a resumed job or a
// joiner learns the step it is at), then, once its trainer has trained, finish (the final
// barrier, after which every push is applied; the final pull; FINISH with the counters) or leave
// (SIGTERM: LEAVE). It owns the transport, the scheduler client, the PsClient and what listens
// to heartbeats (ServerFollower, EvaluatorRole), the FinalSync and the LeaveFlag, and knows
// nothing of models: its trainers (trainer.h) do.
#ifndef R2SP_WORKER_WORKER_SESSION_H_
#define R2SP_WORKER_WORKER_SESSION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/model_layout.h"
#include "common/scheduler_client.h"
#include "common/transport.h"
#include "worker/epoch_planner.h"
#include "worker/evaluator_role.h"
#include "worker/exchanger.h"
#include "worker/final_sync.h"
#include "worker/leave_flag.h"
#include "worker/loop_options.h"
#include "worker/optimizer_state.h"
#include "worker/ps_client.h"
#include "worker/run_log.h"
#include "worker/server_follower.h"
#include "worker/session_options.h"

namespace r2sp {

// Thread-compatible: one thread drives the session (Join, InitialiseParameters, the training
// its trainer runs, End); the transport's I/O thread and the heartbeat thread work inside it.
// Cancel() and RequestLeave() may come from any thread.
class WorkerSession {
 public:
  // Called once, on the heartbeat or the I/O thread, when this worker can no longer be part of
  // the job (it lost the scheduler, was declared dead, or the job failed), with Aborted(why).
  using LostHandler = std::function<void(const absl::Status&)>;

  // `on_lost` may be empty. Connects to nothing yet.
  explicit WorkerSession(SessionOptions options, LostHandler on_lost = nullptr);
  ~WorkerSession();
  WorkerSession(const WorkerSession&) = delete;
  WorkerSession& operator=(const WorkerSession&) = delete;

  // Connects and registers `tensors` (`wants_data_shard`: the trainer trains on a data set's
  // shard: proto RegisterRequest); the model layout, the clients and heartbeats. Once. The
  // options' Validate() error first.
  absl::Status Join(std::vector<proto::TensorSpec> tensors, bool wants_data_shard);
  // After Join: the job's initial parameters into `params` (the model's size). On rank 0 of a
  // new job `init` first fills them (empty: they hold them already) and they go to the servers.
  absl::Status InitialiseParameters(float* params,
                                    const std::function<absl::Status(float*)>& init);
  // Before InitialiseParameters: a new job's rank 0 sends `state` with its parameters (a
  // script's checkpoint: the servers go on from its moments, updates and steps, and every
  // worker from its step), in place of plain initial values. Ignored by other ranks, and in
  // easgd and eawild (the servers keep no optimizer state there).
  void SetInitialState(ScriptOptimizerState state) { initial_state_ = std::move(state); }
  // After Join: the servers' optimizer state (optimizer_state.h).
  absl::StatusOr<ScriptOptimizerState> PullOptimizerState();
  // After training: Leave when `result.left`, else Finish (the final parameters into `params`).
  absl::Status End(const LoopResult& result, float* params);

  // Stops the session's communication (heartbeats, the transport) from any thread: whatever it
  // waits for fails at once. Idempotent.
  void Cancel() ABSL_LOCKS_EXCLUDED(cancel_mu_);
  // Asks, from any thread (a SIGTERM's), to leave the job after the current training step.
  void RequestLeave(const std::string& why) { leave_.Request(why); }
  bool left() const { return leave_.left(); }
  // `status`, a phase's error, unless the worker was lost to the job meanwhile: then why (after
  // waiting for the heartbeats' verdict when the scheduler went silent).
  absl::Status Failed(const absl::Status& status) ABSL_LOCKS_EXCLUDED(lost_mu_);
  // The Aborted error once the worker was lost to the job; OK before.
  absl::Status lost() const ABSL_LOCKS_EXCLUDED(lost_mu_);

  // --- What the job decided (after Join).
  const SessionOptions& options() const { return options_; }
  const proto::RegisterReply& registration() const { return registration_; }
  const proto::AddressBook& book() const { return registration_.book(); }
  int rank() const { return registration_.rank(); }
  // > 0: the job resumed from the servers' checkpoints, or this worker joined a running one.
  int64_t first_step() const { return first_step_; }
  // The data set's shards (one per initial worker) and this worker's; FailedPrecondition when
  // no shard is free for a joiner.
  int DataWorld() const;
  absl::StatusOr<std::pair<int, int>> DataShard() const;
  PsClient* ps() { return ps_.get(); }
  SchedulerClient* scheduler() { return scheduler_.get(); }
  const EvaluatorRole* evaluator() const { return evaluator_.get(); }

  // --- For the trainers' runs.
  // The exchanger's options for the job's mode (JobExchangerOptions).
  ExchangerOptions JobMode() const;
  // The run's options: the session's LoopOptions with the rank, first step, leave flag and,
  // when `settles` (models that evaluate), the settle into `params` (final_sync.h).
  LoopOptions RunOptions(bool settles, float* params);
  // The batch sizes and B into `mode`, the steps of an epoch of `train_samples` into `loop`, from
  // the job's hetero batching or --batch_size over `world` shards; returns the largest batch a
  // step may have.
  int SizeBatches(int64_t train_samples, int world, ExchangerOptions* mode,
                  LoopOptions* loop) const;
  // With the scheduler's epoch plans (--absorb_orphaned_shards): loop->plan_epoch asks for
  // each epoch's live shards and hands them to `use_plan`. Nothing otherwise.
  void PlanEpochs(int world, int shard, int64_t train_samples, const ExchangerOptions& mode,
                  Exchanger* exchanger, LoopOptions* loop, EpochPlanUser use_plan);
  // --metrics and --timeline, opened for this rank.
  absl::StatusOr<std::unique_ptr<RunLog>> OpenLog() const;

 private:
  void Lost(const std::string& why) ABSL_LOCKS_EXCLUDED(lost_mu_);
  absl::Status Finish(const LoopResult& result, float* params);
  absl::Status Leave(const LoopResult& result);

  const SessionOptions options_;
  const LostHandler on_lost_;
  std::vector<proto::TensorSpec> tensors_;
  bool joined_ = false;
  bool real_model_ = false;  // trains on a data set (Join's wants_data_shard)
  absl::Mutex cancel_mu_;  // Cancel against Join's creation of the two below
  bool cancelled_ ABSL_GUARDED_BY(cancel_mu_) = false;
  std::unique_ptr<Transport> transport_;        // set under cancel_mu_
  std::unique_ptr<SchedulerClient> scheduler_;  // set under cancel_mu_
  proto::RegisterReply registration_;
  std::optional<ModelLayout> layout_;
  std::unique_ptr<PsClient> ps_;
  std::unique_ptr<ServerFollower> server_follower_;  // heartbeat news of lost servers
  std::unique_ptr<EvaluatorRole> evaluator_;          // heartbeat news of dead workers
  std::unique_ptr<FinalSync> final_sync_;             // the final barrier and pull
  int64_t first_step_ = 0;
  std::optional<ScriptOptimizerState> initial_state_;  // SetInitialState's
  LeaveFlag leave_;
  mutable absl::Mutex lost_mu_;
  absl::Status lost_ ABSL_GUARDED_BY(lost_mu_);
};

}  // namespace r2sp

#endif  // R2SP_WORKER_WORKER_SESSION_H_
