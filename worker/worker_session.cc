// See worker_session.h.
#include "worker/worker_session.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/node_connection.h"
#include "common/status_macros.h"
#include "common/sync_modes.h"
#include "glog/logging.h"
#include "worker/worker_reports.h"

namespace r2sp {

WorkerSession::WorkerSession(SessionOptions options, LostHandler on_lost)
    : options_(std::move(options)), on_lost_(std::move(on_lost)) {}

WorkerSession::~WorkerSession() { Cancel(); }

void WorkerSession::Cancel() {
  absl::MutexLock lock(&cancel_mu_);
  cancelled_ = true;
  if (scheduler_ != nullptr) scheduler_->StopHeartbeats();
  if (transport_ != nullptr) transport_->Stop();
}

void WorkerSession::Lost(const std::string& why) {
  const absl::Status lost = absl::AbortedError(why);
  {
    absl::MutexLock lock(&lost_mu_);
    if (!lost_.ok()) return;
    lost_ = lost;
  }
  LOG(ERROR) << "worker lost to the job: " << why;
  if (on_lost_) on_lost_(lost);
}

absl::Status WorkerSession::lost() const {
  absl::MutexLock lock(&lost_mu_);
  return lost_;
}

absl::Status WorkerSession::Failed(const absl::Status& status) {
  if (status.ok()) return status;
  // A server that lost the scheduler stops serving, and this worker's next pull fails before
  // its own heartbeats tell it why: let them (on_lost_; status 3, "lost the scheduler").
  if (scheduler_ != nullptr && joined_) scheduler_->AwaitVerdictIfSilent();
  absl::MutexLock lock(&lost_mu_);
  return lost_.ok() ? status : lost_;
}

absl::Status WorkerSession::Join(std::vector<proto::TensorSpec> tensors, bool wants_data_shard) {
  if (joined_) return absl::FailedPreconditionError("the worker has joined the job already");
  R2SP_RETURN_IF_ERROR(options_.Validate());
  tensors_ = std::move(tensors);
  real_model_ = wants_data_shard;
  R2SP_ASSIGN_OR_RETURN(NodeConnection node, ConnectNode(options_.connection));
  {
    absl::MutexLock lock(&cancel_mu_);
    if (cancelled_) return absl::CancelledError("the worker was cancelled before it joined");
    transport_ = std::move(node.transport);
    scheduler_ = std::move(node.scheduler);
  }
  joined_ = true;
  R2SP_ASSIGN_OR_RETURN(registration_,
                        WithContext(scheduler_->Register(proto::WORKER, tensors_, real_model_,
                                                         options_.rank),
                                    "cannot join the job"));
  const proto::AddressBook& book = registration_.book();
  R2SP_ASSIGN_OR_RETURN(
      layout_, WithContext(ModelLayout::Create(tensors_, book.partition_bytes(),
                                               book.servers_size()),
                           "bad model layout"));
  std::vector<std::string> servers;
  for (const proto::NodeInfo& s : book.servers()) servers.push_back(s.endpoint());
  PsClientOptions ps_options = options_.ps;
  ps_options.rank = registration_.rank();
  if (book.server_replace_ms() > 0) {
    // Long enough for the loss to be noticed and a replacement to restore; if none comes, the
    // job fails and the heartbeats say so.
    ps_options.server_retry = absl::Milliseconds(2 * book.server_replace_ms()) + absl::Seconds(30);
  }
  ps_ = std::make_unique<PsClient>(transport_.get(), &*layout_, servers, ps_options);
  server_follower_ = std::make_unique<ServerFollower>(transport_.get(), ps_.get(), book);
  evaluator_ = std::make_unique<EvaluatorRole>(registration_.rank());
  final_sync_ = std::make_unique<FinalSync>(scheduler_.get(), ps_.get(), evaluator_.get(), book);
  // Lost the scheduler, declared dead, the job failed: nothing this worker does counts any more.
  scheduler_->StartHeartbeats(
      [follower = server_follower_.get(),
       role = evaluator_.get()](const proto::HeartbeatReply& beat) {
        follower->OnHeartbeat(beat);
        role->OnHeartbeat(beat);
      },
      [this](const std::string& why) { Lost(why); });
  LogJoined(options_, registration_, *layout_);
  return CheckJobMode(options_, book);
}

absl::Status WorkerSession::InitialiseParameters(
    float* params, const std::function<absl::Status(float*)>& init) {
  const int rank = registration_.rank();
  if (registration_.joined_running_job()) {
    // The servers hold the model already; the groups are past their first barriers.
    scheduler_->SetNextBarrier(proto::WORKERS, registration_.next_workers_barrier());
    scheduler_->SetNextBarrier(proto::ALL, registration_.next_all_barrier());
    std::printf("worker %d: joined the running job (%d workers)\n", rank,
                registration_.book().workers_size());
  } else {
    R2SP_RETURN_IF_ERROR_WITH(scheduler_->Barrier(proto::ALL), "waiting for the servers");
    if (rank == 0) {
      if (init) R2SP_RETURN_IF_ERROR(init(params));
      const bool with_state = initial_state_.has_value() && !Elastic(book().sync());
      R2SP_RETURN_IF_ERROR_WITH(
          with_state ? PushInitialState(*transport_, *ps_, rank, params, *initial_state_,
                                        options_.ps.request_timeout)
                     : ps_->Push(params, 0, /*init=*/true).Wait(),
          "initialising the servers");
    }
    R2SP_RETURN_IF_ERROR_WITH(scheduler_->Barrier(proto::WORKERS),
                              "waiting for initial parameters");
  }
  // A bsp, ssp or easgd joiner takes part from its join clock (easgd's is a round): in bsp and
  // easgd it starts from what every clock before it made (waiting for the last to complete).
  const proto::SyncMode sync = registration_.book().sync();
  const bool at_clock =
      registration_.joined_running_job() && (RoundSynchronous(sync) || sync == proto::SSP);
  PullOptions initial;
  if (at_clock && RoundSynchronous(sync)) initial.min_version = registration_.join_clock();
  const Ticket pulled = ps_->Pull(params, initial);
  R2SP_RETURN_IF_ERROR_WITH(pulled.Wait(), "pulling initial parameters");
  // Restored checkpoints, or a joiner: training goes on from the least advanced partition's
  // step (a joiner's in the shard it took over; at its join clock in bsp and ssp).
  double steps = pulled.min_restored_steps();
  if (at_clock) {
    const int64_t steps_per_clock =
        sync == proto::EASGD ? registration_.book().elastic_period() : 1;
    steps = static_cast<double>(registration_.join_clock() * steps_per_clock);
  } else if (registration_.joined_running_job()) {
    steps = real_model_ ? pulled.min_steps() : 0.0;
  }
  if (steps >= 1) {
    first_step_ = static_cast<int64_t>(steps + 1e-6);
    std::printf("worker %d: the job is at step %lld%s\n", rank,
                static_cast<long long>(first_step_),
                registration_.joined_running_job() ? "" : " (servers resumed from checkpoints)");
  }
  return absl::OkStatus();
}

absl::StatusOr<ScriptOptimizerState> WorkerSession::PullOptimizerState() {
  if (ps_ == nullptr) return absl::FailedPreconditionError("the worker has not joined the job");
  return r2sp::PullOptimizerState(*transport_, *ps_, rank(), options_.ps.request_timeout);
}

int WorkerSession::DataWorld() const {
  return registration_.data_world() > 0 ? registration_.data_world()
                                        : registration_.book().workers_size();
}

absl::StatusOr<std::pair<int, int>> WorkerSession::DataShard() const {
  // The data is cut into one shard per initial worker; a joiner trains a dead worker's.
  const int world = DataWorld();
  const int shard = registration_.data_shard();
  if (shard < 0 || shard >= world) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no data shard is free: each of the job's ", world, " shards has a live worker, or ",
        "the survivors took it over (the scheduler's --absorb_orphaned_shards); a worker can "
        "join a running job only in place of a worker that died in the current epoch, or, "
        "without --absorb_orphaned_shards, any dead one"));
  }
  return std::make_pair(world, shard);
}

ExchangerOptions WorkerSession::JobMode() const {
  return JobExchangerOptions(options_, registration_.book());
}

LoopOptions WorkerSession::RunOptions(bool settles, float* params) {
  LoopOptions loop = options_.loop;
  loop.rank = registration_.rank();
  loop.first_step = first_step_;
  loop.leave_requested = [this] { return leave_.requested(); };
  if (settles) {
    loop.settle = [this, params](int64_t steps) { return final_sync_->Settle(params, steps); };
  }
  return loop;
}

int WorkerSession::SizeBatches(int64_t train_samples, int world, ExchangerOptions* mode,
                               LoopOptions* loop) const {
  const proto::AddressBook& book = registration_.book();
  mode->hetero_batching = book.hetero_batching();
  mode->lookahead = options_.exchange.lookahead;
  if (mode->hetero_batching) {
    // The scheduler decides the batch sizes; an epoch is the data set in global batches.
    mode->global_batch = book.global_batch();
    mode->initial_batch = book.initial_batch();
    loop->steps_per_epoch = std::max<int64_t>(1, train_samples / book.global_batch());
    return book.global_batch();
  }
  mode->global_batch = options_.batch_size * world;
  mode->initial_batch = options_.batch_size;
  loop->steps_per_epoch = std::max<int64_t>(1, train_samples / world / options_.batch_size);
  return options_.batch_size;
}

void WorkerSession::PlanEpochs(int world, int shard, int64_t train_samples,
                               const ExchangerOptions& mode, Exchanger* exchanger,
                               LoopOptions* loop, EpochPlanUser use_plan) {
  if (!registration_.book().absorb_orphaned_shards()) return;
  EpochPlannerOptions o;
  o.rank = registration_.rank();
  o.world = world;
  o.shard = shard;
  o.batch = mode.hetero_batching ? 0 : options_.batch_size;
  o.fixed_steps = loop->steps_per_epoch;
  o.train_samples = train_samples;
  loop->plan_epoch = MakeEpochPlanner(o, scheduler_.get(), exchanger, std::move(use_plan));
}

absl::StatusOr<std::unique_ptr<RunLog>> WorkerSession::OpenLog() const {
  return WithContext(
      RunLog::Open(options_.metrics_path, options_.timeline_path, registration_.rank()),
      "opening --metrics/--timeline");
}

absl::Status WorkerSession::End(const LoopResult& result, float* params) {
  if (result.left) return Leave(result);
  R2SP_RETURN_IF_ERROR(Finish(result, params));
  std::printf("worker %d: done\n", scheduler_->rank());
  return absl::OkStatus();
}

absl::Status WorkerSession::Leave(const LoopResult& result) {
  const proto::NodeCounters counters = FinishCounters(options_, result, ps_->counters(),
                                                      transport_->counters().dropped_messages);
  const std::string why = leave_.why();
  R2SP_RETURN_IF_ERROR_WITH(scheduler_->Leave(why, counters), "leaving the job");
  leave_.SetLeft();
  Cancel();
  std::printf("worker %d: left the job (%s) after step %lld\n", scheduler_->rank(), why.c_str(),
              static_cast<long long>(result.steps));
  return absl::OkStatus();
}

absl::Status WorkerSession::Finish(const LoopResult& result, float* params) {
  R2SP_RETURN_IF_ERROR(final_sync_->PassBarrier());  // passed already if the run settled
  // Elastic modes: the final pull brings the centre; this worker's own parameters go to .local.
  const bool elastic = Elastic(registration_.book().sync());
  const size_t size = layout_->total_elements();
  const std::string local = elastic ? ParamBytes(params, size) : "";
  R2SP_RETURN_IF_ERROR(final_sync_->PullFinal(params, result.steps));
  R2SP_RETURN_IF_ERROR(DumpParams(options_.dump_params_path, params, size, local));
  const proto::NodeCounters counters = FinishCounters(options_, result, ps_->counters(),
                                                      transport_->counters().dropped_messages);
  R2SP_RETURN_IF_ERROR_WITH(scheduler_->Finish(counters), "reporting to the scheduler");
  Cancel();  // under cancel_mu_: another thread's Cancel may stop them at the same time
  return absl::OkStatus();
}

}  // namespace r2sp
