// See worker_node.h.
#include "worker/worker_node.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/cli.h"
#include "common/status_macros.h"
#include "common/sync_modes.h"
#include "glog/logging.h"
#include "models/backend.h"
#include "models/data/epoch_samples.h"
#include "worker/epoch_planner.h"
#include "worker/eval_only.h"
#include "worker/exchanger.h"
#include "worker/model_workload.h"
#include "worker/synthetic_workload.h"
#include "worker/worker_reports.h"

namespace r2sp {
WorkerNode::WorkerNode(WorkerOptions options, LostHandler on_lost,
                       std::optional<ExternalModel> external)
    : options_(std::move(options)), on_lost_(std::move(on_lost)), external_(std::move(external)) {
  CHECK_EQ(external_.has_value(), options_.external_model)
      << "an external model needs WorkerOptions::external_model, and the other way round";
}

WorkerNode::~WorkerNode() { Cancel(); }

void WorkerNode::Cancel() {
  absl::MutexLock lock(&cancel_mu_);
  cancelled_ = true;
  if (scheduler_ != nullptr) scheduler_->StopHeartbeats();
  if (transport_ != nullptr) transport_->Stop();
}

absl::Status WorkerNode::Run() {
  R2SP_RETURN_IF_ERROR(options_.Validate());
  R2SP_RETURN_IF_ERROR(LoadModel());
  R2SP_RETURN_IF_ERROR(Join());
  absl::Status status = TrainAndFinish();
  if (status.ok()) return status;
  // A server that lost the scheduler stops serving, and this worker's next pull fails before
  // its own heartbeats tell it why: let them (on_lost_; status 3, "lost the scheduler").
  scheduler_->AwaitVerdictIfSilent();
  absl::MutexLock lock(&lost_mu_);
  return lost_.ok() ? status : lost_;
}

void WorkerNode::Lost(const std::string& why) {
  const absl::Status lost = absl::AbortedError(why);
  {
    absl::MutexLock lock(&lost_mu_);
    if (!lost_.ok()) return;
    lost_ = lost;
  }
  LOG(ERROR) << "worker lost to the job: " << why;
  if (on_lost_) on_lost_(lost);
}

absl::Status WorkerNode::TrainAndFinish() {
  R2SP_RETURN_IF_ERROR(CheckJobMode(options_, registration_.book()));
  R2SP_RETURN_IF_ERROR(InitialiseParameters());
  if (external_) external_->workload->Joined(JoinedJobInfo());
  R2SP_ASSIGN_OR_RETURN(LoopResult result, WithContext(Train(), "training"));
  if (result.left) return Leave(result);
  R2SP_RETURN_IF_ERROR(Finish(result));
  std::printf("worker %d: done\n", scheduler_->rank());
  return absl::OkStatus();
}

absl::Status WorkerNode::LoadModel() {
  if (external_) {
    tensors_ = external_->tensors;
    return absl::OkStatus();
  }
  if (synthetic()) {
    tensors_ = SyntheticModel(static_cast<size_t>(options_.model_mb * 1024 * 1024 / 4),
                              options_.layers);
    return absl::OkStatus();
  }
  R2SP_ASSIGN_OR_RETURN(data_, WithContext(LoadWorkerData(options_.data, options_.data_dir),
                                           "cannot load the data set"));
  R2SP_ASSIGN_OR_RETURN(graph_, WithContext(models::BuildModel(options_.model, data_->train.shape,
                                                               data_->train.num_classes),
                                            "cannot build the model"));
  tensors_ = graph_->TensorSpecs();
  return absl::OkStatus();
}

absl::Status WorkerNode::Join() {
  R2SP_ASSIGN_OR_RETURN(NodeConnection node, ConnectNode(options_.connection));
  {
    absl::MutexLock lock(&cancel_mu_);
    if (cancelled_) return absl::CancelledError("the worker was cancelled before it joined");
    transport_ = std::move(node.transport);
    scheduler_ = std::move(node.scheduler);
  }
  R2SP_ASSIGN_OR_RETURN(registration_,
                        WithContext(scheduler_->Register(proto::WORKER, tensors_, !synthetic()),
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
  return absl::OkStatus();
}

absl::Status WorkerNode::InitialiseParameters() {
  if (!external_) params_.assign(layout_->total_elements(), 0.0f);
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
      if (external_) {
        // The caller's parameters start the job.
      } else if (!options_.init_model_path.empty()) {
        R2SP_RETURN_IF_ERROR(
            LoadInitialModel(options_.init_model_path, *graph_, params(), params_.size()));
      } else if (options_.random_init && synthetic()) {
        FillInitialParams(options_.seed, params_.data(), params_.size());
      } else if (options_.random_init) {
        models::InitParams(*graph_, options_.seed, params_.data());
      }
      R2SP_RETURN_IF_ERROR_WITH(ps_->Push(params(), 0, /*init=*/true).Wait(),
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
  const Ticket pulled = ps_->Pull(params(), initial);
  R2SP_RETURN_IF_ERROR_WITH(pulled.Wait(), "pulling initial parameters");
  // Restored checkpoints, or a joiner: training goes on from the least advanced partition's
  // step (a joiner's in the shard it took over; at its join clock in bsp and ssp).
  double steps = pulled.min_restored_steps();
  if (at_clock) {
    const int64_t steps_per_clock =
        sync == proto::EASGD ? registration_.book().elastic_period() : 1;
    steps = static_cast<double>(registration_.join_clock() * steps_per_clock);
  } else if (registration_.joined_running_job()) {
    steps = synthetic() ? 0.0 : pulled.min_steps();
  }
  if (steps >= 1) {
    first_step_ = static_cast<int64_t>(steps + 1e-6);
    std::printf("worker %d: the job is at step %lld%s\n", rank,
                static_cast<long long>(first_step_),
                registration_.joined_running_job() ? "" : " (servers resumed from checkpoints)");
  }
  return absl::OkStatus();
}

absl::StatusOr<LoopResult> WorkerNode::Train() {
  const ExchangerOptions mode = JobExchangerOptions(options_, registration_.book());
  LoopOptions loop = options_.loop;
  loop.rank = registration_.rank();
  loop.first_step = first_step_;
  loop.leave_requested = [this] { return leave_.requested(); };
  // Models that evaluate do it after the final barrier (final_sync.h).
  if (!synthetic()) {
    loop.settle = [this](int64_t steps) { return final_sync_->Settle(params(), steps); };
  }
  R2SP_ASSIGN_OR_RETURN(std::unique_ptr<RunLog> log,
                        WithContext(RunLog::Open(options_.metrics_path, options_.timeline_path,
                                                 registration_.rank()),
                                    "opening --metrics/--timeline"));
  if (external_) return TrainExternal(loop, mode, log.get());
  if (!synthetic()) return TrainModel(loop, mode, log.get());
  // One epoch of --iterations steps.
  loop.epochs = 1;
  loop.max_steps = 0;
  loop.eval_every = 0;
  loop.steps_per_epoch = options_.iterations;
  loop.log_every = options_.log_every > 0 ? options_.log_every : 10;
  SyntheticOptions synthetic = options_.synthetic;
  synthetic.rank = registration_.rank();
  synthetic.seed = options_.seed;
  SyntheticWorkload workload(synthetic, params_.size());
  Exchanger exchanger(mode, ps_.get(), scheduler_.get(), log.get());
  return RunTrainingLoop(loop, &workload, &exchanger, params(), log.get());
}

int WorkerNode::DataWorld() const {
  return registration_.data_world() > 0 ? registration_.data_world()
                                        : registration_.book().workers_size();
}

absl::StatusOr<std::pair<int, int>> WorkerNode::DataShard() const {
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

EpochPlannerOptions WorkerNode::PlannerOptions(int world, int shard, const ExchangerOptions& mode,
                                               const LoopOptions& loop,
                                               int64_t train_samples) const {
  EpochPlannerOptions o;
  o.rank = registration_.rank();
  o.world = world;
  o.shard = shard;
  o.batch = mode.hetero_batching ? 0 : options_.batch_size;
  o.fixed_steps = loop.steps_per_epoch;
  o.train_samples = train_samples;
  return o;
}

int WorkerNode::SizeBatches(int64_t train_samples, int world, ExchangerOptions* mode,
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

absl::StatusOr<LoopResult> WorkerNode::TrainModel(const LoopOptions& loop_in,
                                                  ExchangerOptions mode, RunLog* log) {
  const int rank = registration_.rank();
  R2SP_ASSIGN_OR_RETURN(const auto world_shard, DataShard());
  const int world = world_shard.first, shard = world_shard.second;
  models::BackendOptions backend = options_.backend;
  backend.seed = options_.seed + rank;
  R2SP_ASSIGN_OR_RETURN(std::unique_ptr<models::Network> net,
                        WithContext(models::CreateNetwork(*graph_, backend),
                                    "cannot create the network"));
  // The pulls' target, read by every step's upload: pinned for full-speed device copies.
  absl::StatusOr<std::unique_ptr<models::PinnedHostMemory>> params_pin =
      net->PinHostMemory(params_.data(), params_.size() * sizeof(float));
  if (!params_pin.ok()) {
    LOG(WARNING) << "parameters stay in pageable memory (slower device copies): "
                 << params_pin.status();
  }
  models::BatcherOptions batcher_options = options_.batcher;
  batcher_options.rank = shard;
  batcher_options.world = world;
  batcher_options.seed = options_.seed;
  batcher_options.augment = options_.batcher.augment && options_.data == "cifar10";
  models::Batcher batcher(&data_->train, batcher_options);

  LoopOptions loop = loop_in;
  loop.log_every = options_.log_every > 0 ? options_.log_every : 50;
  ModelWorkloadOptions workload_options = options_.workload;
  workload_options.largest_batch = SizeBatches(data_->train.size(), world, &mode, &loop);
  workload_options.rank = rank;
  workload_options.wrapping_batches = mode.hetero_batching;
  workload_options.evaluates = [role = evaluator_.get()] { return role->Evaluates(); };
  workload_options.evaluation_progress = [s = scheduler_.get()] { s->NoteProgress(); };
  workload_options.data = options_.data;
  // Elastic modes take the local step on the fp32 gradient (they push differences, not it).
  workload_options.fp16_gradients = options_.workload.fp16_gradients &&
                                    options_.ps.push_codec.codec == proto::FP16 &&
                                    !Elastic(registration_.book().sync());
  ModelWorkload workload(workload_options, net.get(), &batcher, &data_->test);
  Exchanger exchanger(mode, ps_.get(), scheduler_.get(), log);
  if (registration_.book().absorb_orphaned_shards()) {
    const int64_t size = data_->train.size();
    loop.plan_epoch = MakeEpochPlanner(
        PlannerOptions(world, shard, mode, loop, size), scheduler_.get(), &exchanger,
        [&batcher, size, world, shard](int, const std::vector<int>& live, bool counted, int64_t) {
          batcher.SetSamples(models::EpochSamples(size, world, shard, live), !counted);
        });
  }
  R2SP_ASSIGN_OR_RETURN(LoopResult r,
                        RunTrainingLoop(loop, &workload, &exchanger, params(), log));
  PrintTrained(rank, r);
  return r;
}

JoinedJob WorkerNode::JoinedJobInfo() const {
  const proto::AddressBook& book = registration_.book();
  JoinedJob job;
  job.rank = registration_.rank();
  job.workers = book.workers_size();
  job.mode = SyncModeName(book.sync());
  job.hetero_batching = book.hetero_batching();
  job.data_world = DataWorld();
  job.data_shard = registration_.data_shard();
  job.first_step = first_step_;
  job.batch_size = job.hetero_batching ? book.initial_batch() : options_.batch_size;
  job.overlaps_backward = options_.exchange.overlap;
  job.overlaps_pulls = JobExchangerOptions(options_, book).overlaps_pulls();
  job.evaluates = [role = evaluator_.get()] { return role->Evaluates(); };
  if (Elastic(book.sync())) {  // the Python client's evaluations of the centre
    job.elastic_period = book.elastic_period();
    job.pull_centre = CentrePuller(ps_.get(), book.sync());
  }
  return job;
}

absl::StatusOr<LoopResult> WorkerNode::TrainExternal(LoopOptions loop, ExchangerOptions mode,
                                                     RunLog* log) {
  HandoffWorkload* workload = external_->workload;
  R2SP_ASSIGN_OR_RETURN(const int64_t train_samples, workload->AwaitStart());
  R2SP_ASSIGN_OR_RETURN(const auto world_shard, DataShard());
  const int world = world_shard.first, shard = world_shard.second;
  loop.log_every = options_.log_every > 0 ? options_.log_every : 50;
  SizeBatches(train_samples, world, &mode, &loop);
  // The script's evaluation is asked for after each epoch (JoinedJob::evaluates says whether).
  workload->SetTraining(world);
  Exchanger exchanger(mode, ps_.get(), scheduler_.get(), log);
  if (registration_.book().absorb_orphaned_shards()) {
    loop.plan_epoch = MakeEpochPlanner(
        PlannerOptions(world, shard, mode, loop, train_samples), scheduler_.get(), &exchanger,
        [workload](int epoch, const std::vector<int>& live, bool, int64_t) {
          workload->SetEpochPlan(epoch, live);
        });
  }
  R2SP_ASSIGN_OR_RETURN(LoopResult r,
                        RunTrainingLoop(loop, workload, &exchanger, params(), log));
  PrintTrained(registration_.rank(), r);
  workload->Finish(r);
  // The final pull (Finish) writes the parameters the script reads until its finish().
  while (!workload->AwaitFinal(absl::Seconds(1))) scheduler_->NoteProgress();
  return r;
}

absl::Status WorkerNode::Leave(const LoopResult& result) {
  const proto::NodeCounters counters = FinishCounters(options_, result, ps_->counters(),
                                                      transport_->counters().dropped_messages);
  const std::string why = leave_.why();
  R2SP_RETURN_IF_ERROR_WITH(scheduler_->Leave(why, counters), "leaving the job");
  leave_.SetLeft();
  scheduler_->StopHeartbeats();
  transport_->Stop();
  std::printf("worker %d: left the job (%s) after step %lld\n", scheduler_->rank(), why.c_str(),
              static_cast<long long>(result.steps));
  return absl::OkStatus();
}

absl::Status WorkerNode::Finish(const LoopResult& result) {
  R2SP_RETURN_IF_ERROR(final_sync_->PassBarrier());  // passed already if the loop settled
  // Elastic modes: the final pull brings the centre; this worker's own parameters go to .local.
  const bool elastic = Elastic(registration_.book().sync());
  const std::string local = elastic ? ParamBytes(params(), layout_->total_elements()) : "";
  R2SP_RETURN_IF_ERROR(final_sync_->PullFinal(params(), result.steps));
  R2SP_RETURN_IF_ERROR(DumpParams(options_.dump_params_path, params(), layout_->total_elements(),
                                  local));
  const proto::NodeCounters counters = FinishCounters(options_, result, ps_->counters(),
                                                      transport_->counters().dropped_messages);
  R2SP_RETURN_IF_ERROR_WITH(scheduler_->Finish(counters), "reporting to the scheduler");
  // Under cancel_mu_: another thread's Cancel (worker_threads.h) may stop them at the same time.
  Cancel();
  return absl::OkStatus();
}

}  // namespace r2sp
