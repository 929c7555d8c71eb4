// The `worker` binary: registers, initialises the servers (rank 0), then trains through the
// parameter servers — a real model on a real data set (trainer.h), or the synthetic workload
// (synthetic_workload.h) for transport tests and benchmarks — and reports to the scheduler.
#include <cstdio>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cli.h"
#include "common/model_layout.h"
#include "common/scheduler_client.h"
#include "common/transport.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "models/data/batcher.h"
#include "models/data/dataset.h"
#include "models/graph.h"
#include "models/network.h"
#ifdef R2SP_WITH_CUDA
#include "models/cuda/cuda_network.h"
#endif
#include "worker/exchange.h"
#include "worker/ps_client.h"
#include "worker/run_log.h"
#include "worker/synthetic_workload.h"
#include "worker/trainer.h"

DEFINE_string(scheduler, "tcp://127.0.0.1:9000", "the scheduler's endpoint");
DEFINE_string(bind, "tcp://0.0.0.0:*", "ZeroMQ endpoint to listen on (* = any free port)");
DEFINE_string(advertise_host, "", "host name or address other nodes reach us at");
DEFINE_string(model, "synthetic", "mlp, cnn, resnet20, or synthetic (no data; see --model_mb)");
DEFINE_string(data, "fashion-mnist", "fashion-mnist, mnist or cifar10");
DEFINE_string(data_dir, "", "directory of the data set's files (default for fashion-mnist: "
              "Debian's /usr/share/datasets/fashion-mnist)");
DEFINE_int32(batch_size, 64, "samples per step on this worker");
DEFINE_int32(epochs, 1, "passes over this worker's shard");
DEFINE_int64(max_steps, 0, "stop after this many steps (0: run all epochs)");
DEFINE_string(device, "cpu", "cpu (oneDNN) or cuda (cuDNN/cuBLAS; needs a build with "
              "--config=cuda)");
DEFINE_int32(gpu, 0, "CUDA device index for --device=cuda");
DEFINE_int32(threads, 0, "CPU backend threads (0: oneDNN's default, all cores)");
DEFINE_bool(augment, true, "cifar10: random crop and flip");
DEFINE_bool(lookahead, true, "r2sp: compute each gradient at the parameters the servers predict "
            "for when it will be applied (delay compensation; docs/MODES.md)");
DEFINE_double(compute_slowdown, 1.0, "EMULATION of a slower machine: stretch each compute phase "
              "to this many times its length by sleeping after it (1 = off)");
DEFINE_double(emulate_ms_per_sample, 0, "EMULATION of an accelerator: each compute phase lasts "
              "at least this many milliseconds per sample (sleeping after the real compute)");
DEFINE_string(metrics, "", "write per-iteration metrics here (JSON lines)");
DEFINE_string(timeline, "", "write a Chrome-trace timeline of compute/wait/push/pull here");
DEFINE_double(model_mb, 16, "synthetic model size in MB of fp32 parameters");
DEFINE_int32(layers, 8, "synthetic model: number of layers (weight + bias tensors each)");
DEFINE_int32(iterations, 100, "synthetic: iterations");
DEFINE_string(grad, "random", "synthetic gradients: random or known (exactly checkable)");
DEFINE_int32(compute_ms, 0, "synthetic compute time per iteration, milliseconds");
DEFINE_string(init, "random", "initial parameters: random (from --seed) or zero");
DEFINE_uint64(seed, 1, "seed for initial parameters, shuffling, dropout and random gradients");
DEFINE_string(dump_params, "", "after training, write the final parameters (raw fp32) here");
DEFINE_int32(log_every, 0, "print progress every this many steps (0: 10 synthetic, 50 real)");
DEFINE_int32(heartbeat_ms, 1000, "heartbeat period");
DEFINE_int32(register_timeout_s, 60, "give up if the scheduler does not answer in this time");
DEFINE_int32(request_timeout_s, 120, "give up on a push or pull after this time");

namespace {

void ExitIfError(const absl::Status& status, const char* what) {
  if (!status.ok()) {
    r2sp::ExitWithError(absl::Status(status.code(), absl::StrCat(what, ": ", status.message())));
  }
}

void CheckFlags() {
  using r2sp::CheckFlag;
  CheckFlag(FLAGS_model == "synthetic" || FLAGS_model == "mlp" || FLAGS_model == "cnn" ||
                FLAGS_model == "resnet20",
            "--model must be mlp, cnn, resnet20 or synthetic");
  CheckFlag(FLAGS_batch_size >= 1 && FLAGS_batch_size <= 65536, "--batch_size must be in [1, 65536]");
  CheckFlag(FLAGS_epochs >= 1, "--epochs must be >= 1");
  CheckFlag(FLAGS_max_steps >= 0, "--max_steps must be >= 0");
  CheckFlag(FLAGS_threads >= 0, "--threads must be >= 0");
  CheckFlag(FLAGS_device == "cpu" || FLAGS_device == "cuda", "--device must be cpu or cuda");
#ifndef R2SP_WITH_CUDA
  CheckFlag(FLAGS_device == "cpu",
            "--device=cuda: this worker was built without CUDA (bazel build --config=cuda)");
#endif
  CheckFlag(FLAGS_gpu >= 0, "--gpu must be >= 0");
  CheckFlag(FLAGS_compute_slowdown >= 1.0 && FLAGS_compute_slowdown <= 100,
            "--compute_slowdown must be in [1, 100]");
  CheckFlag(FLAGS_emulate_ms_per_sample >= 0 && FLAGS_emulate_ms_per_sample <= 1000,
            "--emulate_ms_per_sample must be in [0, 1000]");
  CheckFlag(FLAGS_model_mb > 0 && FLAGS_model_mb <= 16384, "--model_mb must be in (0, 16384]");
  CheckFlag(FLAGS_layers >= 1 && FLAGS_layers <= 10000, "--layers must be in [1, 10000]");
  CheckFlag(FLAGS_iterations >= 0, "--iterations must be >= 0");
  CheckFlag(FLAGS_grad == "random" || FLAGS_grad == "known", "--grad must be random or known");
  CheckFlag(FLAGS_init == "random" || FLAGS_init == "zero", "--init must be random or zero");
  CheckFlag(FLAGS_compute_ms >= 0, "--compute_ms must be >= 0");
  CheckFlag(FLAGS_log_every >= 0, "--log_every must be >= 0");
  CheckFlag(FLAGS_heartbeat_ms >= 10, "--heartbeat_ms must be >= 10");
  CheckFlag(FLAGS_register_timeout_s >= 1, "--register_timeout_s must be >= 1");
  CheckFlag(FLAGS_request_timeout_s >= 1, "--request_timeout_s must be >= 1");
  if (FLAGS_model == "synthetic") {
    CheckFlag(static_cast<size_t>(FLAGS_model_mb * 1024 * 1024 / 4) >= 65u * FLAGS_layers,
              "--model_mb is too small for --layers (each layer has a 64-float bias)");
  }
}

}  // namespace

int main(int argc, char** argv) {
  r2sp::InitProcess(&argc, &argv, "R2SP worker");
  CheckFlags();
  const bool synthetic = FLAGS_model == "synthetic";

  // What we train decides the tensors we register; load and build it before joining.
  std::vector<r2sp::proto::TensorSpec> model;
  std::unique_ptr<r2sp::models::TrainTest> data;
  std::unique_ptr<r2sp::models::Graph> graph;
  if (synthetic) {
    model = r2sp::SyntheticModel(static_cast<size_t>(FLAGS_model_mb * 1024 * 1024 / 4),
                                 FLAGS_layers);
  } else {
    std::string dir = FLAGS_data_dir;
    if (dir.empty() && FLAGS_data == "fashion-mnist") dir = r2sp::models::kDebianFashionMnistDir;
    r2sp::CheckFlag(!dir.empty(), "--data_dir is required for --data=" + FLAGS_data);
    absl::StatusOr<r2sp::models::TrainTest> loaded = r2sp::models::LoadDataset(FLAGS_data, dir);
    ExitIfError(loaded.status(), "cannot load the data set");
    data = std::make_unique<r2sp::models::TrainTest>(*std::move(loaded));
    absl::StatusOr<r2sp::models::Graph> g = r2sp::models::BuildModel(
        FLAGS_model, data->train.shape, data->train.num_classes);
    ExitIfError(g.status(), "cannot build the model");
    graph = std::make_unique<r2sp::models::Graph>(*std::move(g));
    model = graph->TensorSpecs();
  }

  r2sp::TransportOptions transport_options;
  transport_options.bind_endpoint = FLAGS_bind;
  transport_options.advertise_host = FLAGS_advertise_host;
  auto transport = r2sp::Transport::Create(transport_options);
  if (!transport.ok()) r2sp::ExitWithError(transport.status());
  (*transport)->Start(nullptr);
  r2sp::SchedulerClientOptions client_options;
  client_options.scheduler = FLAGS_scheduler;
  client_options.register_timeout = absl::Seconds(FLAGS_register_timeout_s);
  client_options.heartbeat_period = absl::Milliseconds(FLAGS_heartbeat_ms);
  r2sp::SchedulerClient scheduler(transport->get(), client_options);
  absl::StatusOr<r2sp::proto::RegisterReply> reg = scheduler.Register(r2sp::proto::WORKER, model);
  ExitIfError(reg.status(), "cannot join the job");
  const int rank = reg->rank();
  const r2sp::proto::AddressBook& book = reg->book();
  const int world = book.workers_size();
  absl::StatusOr<r2sp::ModelLayout> layout =
      r2sp::ModelLayout::Create(model, book.partition_bytes(), book.servers_size());
  ExitIfError(layout.status(), "bad model layout");
  std::vector<std::string> servers;
  for (const r2sp::proto::NodeInfo& s : book.servers()) servers.push_back(s.endpoint());
  r2sp::PsClientOptions ps_options;
  ps_options.rank = rank;
  ps_options.request_timeout = absl::Seconds(FLAGS_request_timeout_s);
  r2sp::PsClient ps(transport->get(), &*layout, servers, ps_options);
  scheduler.StartHeartbeats(nullptr);
  const bool bsp = book.sync() == r2sp::proto::BSP;
  LOG(INFO) << "worker " << rank << "/" << world << ": " << FLAGS_model << ", "
            << layout->total_bytes() << " bytes in " << layout->partitions().size()
            << " partitions over " << servers.size() << " servers ("
            << r2sp::SyncModeName(book.sync()) << ")";

  std::vector<float> params(layout->total_elements(), 0.0f);
  if (reg->joined_running_job()) {
    // The servers hold the model already; the groups are past their first barriers.
    scheduler.SetNextBarrier(r2sp::proto::WORKERS, reg->next_workers_barrier());
    scheduler.SetNextBarrier(r2sp::proto::ALL, reg->next_all_barrier());
    std::printf("worker %d: joined the running job (%d workers)\n", rank, world);
  } else {
    ExitIfError(scheduler.Barrier(r2sp::proto::ALL), "waiting for the servers");
  }
  if (rank == 0 && !reg->joined_running_job()) {
    if (FLAGS_init == "random") {
      if (synthetic) {
        r2sp::FillInitialParams(FLAGS_seed, params.data(), params.size());
      } else {
        r2sp::models::InitParams(*graph, FLAGS_seed, params.data());
      }
    }
    ExitIfError(ps.Push(params.data(), 0, /*init=*/true).Wait(), "initialising the servers");
  }
  if (!reg->joined_running_job()) {
    ExitIfError(scheduler.Barrier(r2sp::proto::WORKERS), "waiting for initial parameters");
  }
  ExitIfError(ps.Pull(params.data()).Wait(), "pulling initial parameters");

  r2sp::ExchangeOptions mode;
  mode.sync = book.sync();
  mode.staleness = book.staleness();
  mode.slot_includes_pull = book.r2sp_slot_includes_pull();
  absl::StatusOr<std::unique_ptr<r2sp::RunLog>> log =
      r2sp::RunLog::Open(FLAGS_metrics, FLAGS_timeline, rank);
  ExitIfError(log.status(), "opening --metrics/--timeline");
  r2sp::proto::NodeCounters counters;
  int64_t clocks = 0;
  if (synthetic) {
    r2sp::SyntheticOptions options;
    options.rank = rank;
    options.iterations = FLAGS_iterations;
    options.known_gradients = FLAGS_grad == "known";
    options.seed = FLAGS_seed;
    options.compute_ms = FLAGS_compute_ms;
    options.mode = mode;
    options.log_every = FLAGS_log_every > 0 ? FLAGS_log_every : 10;
    absl::StatusOr<r2sp::SyntheticResult> result =
        r2sp::RunSynthetic(options, &ps, &scheduler, &params, log->get());
    log->reset();  // completes the timeline file
    ExitIfError(result.status(), "training");
    clocks = FLAGS_iterations;
    counters.set_iterations(FLAGS_iterations);
    counters.set_seconds(result->seconds);
    counters.set_model("synthetic");
    counters.set_test_accuracy(-1);  // nothing evaluated
  } else {
    absl::StatusOr<std::unique_ptr<r2sp::models::Network>> net;
    if (FLAGS_device == "cpu") {
      r2sp::models::CpuOptions cpu;
      cpu.threads = FLAGS_threads;
      cpu.seed = FLAGS_seed + rank;
      net = r2sp::models::CreateCpuNetwork(*graph, cpu);
    } else {
#ifdef R2SP_WITH_CUDA
      r2sp::models::CudaOptions cuda;
      cuda.device = FLAGS_gpu;
      cuda.seed = FLAGS_seed + rank;
      net = r2sp::models::CreateCudaNetwork(*graph, cuda);
#endif
    }
    ExitIfError(net.status(), "cannot create the network");
    r2sp::models::BatcherOptions batcher_options;
    batcher_options.rank = rank;
    batcher_options.world = world;
    batcher_options.seed = FLAGS_seed;
    batcher_options.augment = FLAGS_augment && FLAGS_data == "cifar10";
    r2sp::models::Batcher batcher(&data->train, batcher_options);
    r2sp::TrainerOptions options;
    options.rank = rank;
    options.epochs = FLAGS_epochs;
    options.max_steps = FLAGS_max_steps;
    options.mode = mode;
    options.hetero_batching = book.hetero_batching();
    options.compute_slowdown = FLAGS_compute_slowdown;
    options.lookahead = FLAGS_lookahead;
    options.workers = world;
    options.emulate_ms_per_sample = FLAGS_emulate_ms_per_sample;
    if (options.hetero_batching) {
      // The scheduler decides the batch sizes; an epoch is the data set in global batches.
      options.global_batch = book.global_batch();
      options.batch_size = book.initial_batch();
      options.steps_per_epoch = std::max<int64_t>(1, data->train.size() / book.global_batch());
    } else {
      options.batch_size = FLAGS_batch_size;
      options.global_batch = FLAGS_batch_size * world;
      options.steps_per_epoch = std::max<int64_t>(1, data->train.size() / world / FLAGS_batch_size);
    }
    options.evaluate = rank == 0;
    options.log_every = FLAGS_log_every > 0 ? FLAGS_log_every : 50;
    absl::StatusOr<r2sp::TrainResult> result = r2sp::Train(
        options, net->get(), &ps, &scheduler, &batcher, &data->test, &params, log->get());
    log->reset();  // completes the timeline file
    ExitIfError(result.status(), "training");
    clocks = result->steps;
    counters.set_iterations(result->steps);
    counters.set_samples(result->samples);
    counters.set_epochs(result->epochs);
    counters.set_seconds(result->seconds);
    counters.set_model(FLAGS_model);
    counters.set_test_accuracy(result->test_accuracy);
    counters.set_final_loss(result->last_epoch_loss);
    std::printf("worker %d: %lld steps, %lld samples in %.1f s (%.0f samples/s; compute %.1f s, "
                "push+pull %.1f s, of which waiting %.1f s; last batch %d)\n",
                rank, static_cast<long long>(result->steps), static_cast<long long>(result->samples),
                result->seconds, result->samples / std::max(result->seconds, 1e-9),
                result->compute_seconds, result->comm_seconds, result->wait_seconds,
                result->final_batch);
  }

  // Every worker's last push is applied once all have passed this barrier.
  ExitIfError(scheduler.Barrier(r2sp::proto::WORKERS), "final barrier");
  r2sp::PullOptions final_pull;
  final_pull.min_version = bsp ? clocks : 0;
  ExitIfError(ps.Pull(params.data(), final_pull).Wait(), "final pull");
  if (!FLAGS_dump_params.empty()) {
    std::string bytes(reinterpret_cast<const char*>(params.data()), params.size() * sizeof(float));
    ExitIfError(r2sp::WriteFileAtomically(FLAGS_dump_params, bytes), "writing --dump_params");
  }
  const r2sp::PsClientCounters c = ps.counters();
  counters.set_bytes_pushed(c.bytes_pushed);
  counters.set_bytes_pulled(c.bytes_pulled);
  counters.set_pushes(c.pushes);
  counters.set_pulls(c.pulls);
  counters.set_dropped_messages((*transport)->counters().dropped_messages);
  ExitIfError(scheduler.Finish(counters), "reporting to the scheduler");
  scheduler.StopHeartbeats();
  (*transport)->Stop();
  std::printf("worker %d: done\n", rank);
  return 0;
}
