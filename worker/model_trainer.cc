// See model_trainer.h.
#include "worker/model_trainer.h"

#include <memory>
#include <utility>

#include "common/status_macros.h"
#include "common/sync_modes.h"
#include "glog/logging.h"
#include "models/backend.h"
#include "models/data/batcher.h"
#include "models/graph_tensors.h"
#include "common/epoch_samples.h"
#include "worker/eval_only.h"
#include "worker/exchanger.h"
#include "worker/model_workload.h"
#include "worker/training_loop.h"
#include "worker/worker_reports.h"

namespace r2sp {

ModelTrainer::ModelTrainer(const WorkerOptions& options) : options_(options) {}

absl::StatusOr<std::vector<proto::TensorSpec>> ModelTrainer::Load() {
  R2SP_RETURN_IF_ERROR(options_.Validate());
  R2SP_ASSIGN_OR_RETURN(data_, WithContext(LoadWorkerData(options_.data, options_.data_dir),
                                           "cannot load the data set"));
  R2SP_ASSIGN_OR_RETURN(graph_, WithContext(models::BuildModel(options_.model, data_->train.shape,
                                                               data_->train.num_classes),
                                            "cannot build the model"));
  std::vector<proto::TensorSpec> tensors = models::GraphTensorSpecs(*graph_);
  size_t size = 0;
  for (const proto::TensorSpec& t : tensors) size += t.num_elements();
  params_.assign(size, 0.0f);
  return tensors;
}

absl::Status ModelTrainer::InitialParameters() {
  if (!options_.init_model_path.empty()) {
    return LoadInitialModel(options_.init_model_path, *graph_, params_.data(), params_.size());
  }
  if (options_.random_init) models::InitParams(*graph_, options_.seed, params_.data());
  return absl::OkStatus();
}

absl::StatusOr<LoopResult> ModelTrainer::Train(WorkerSession* session) {
  const int rank = session->rank();
  R2SP_ASSIGN_OR_RETURN(const auto world_shard, session->DataShard());
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

  R2SP_ASSIGN_OR_RETURN(std::unique_ptr<RunLog> log, session->OpenLog());
  ExchangerOptions mode = session->JobMode();
  // Models that evaluate do it after the final barrier (final_sync.h).
  LoopOptions loop = session->RunOptions(/*settles=*/true, params_.data());
  loop.log_every = options_.log_every > 0 ? options_.log_every : 50;
  ModelWorkloadOptions workload_options = options_.workload;
  workload_options.largest_batch = session->SizeBatches(data_->train.size(), world, &mode, &loop);
  workload_options.rank = rank;
  workload_options.wrapping_batches = mode.hetero_batching;
  workload_options.evaluates = [role = session->evaluator()] { return role->Evaluates(); };
  workload_options.evaluation_progress = [s = session->scheduler()] { s->NoteProgress(); };
  workload_options.data = options_.data;
  // Elastic modes take the local step on the fp32 gradient (they push differences, not it).
  workload_options.fp16_gradients = options_.workload.fp16_gradients &&
                                    options_.ps.push_codec.codec == proto::FP16 &&
                                    !Elastic(session->book().sync());
  ModelWorkload workload(workload_options, net.get(), &batcher, &data_->test);
  Exchanger exchanger(mode, session->ps(), session->scheduler(), log.get());
  const int64_t size = data_->train.size();
  session->PlanEpochs(
      world, shard, size, mode, &exchanger, &loop,
      [&batcher, size, world, shard](int, const std::vector<int>& live, bool counted, int64_t) {
        batcher.SetSamples(EpochSamples(size, world, shard, live), !counted);
      });
  R2SP_ASSIGN_OR_RETURN(LoopResult r,
                        RunTrainingLoop(loop, &workload, &exchanger, params_.data(), log.get()));
  PrintTrained(rank, r);
  return r;
}

}  // namespace r2sp
