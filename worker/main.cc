// The `worker` binary: registers, initialises the servers (rank 0), then runs N iterations of
// compute -> push gradients -> pull parameters through the parameter servers, and reports.
// In this version "compute" is the synthetic workload of synthetic_workload.h.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cli.h"
#include "common/model_layout.h"
#include "common/scheduler_client.h"
#include "common/transport.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "worker/ps_client.h"
#include "worker/synthetic_workload.h"

DEFINE_string(scheduler, "tcp://127.0.0.1:9000", "the scheduler's endpoint");
DEFINE_string(bind, "tcp://0.0.0.0:*", "ZeroMQ endpoint to listen on (* = any free port)");
DEFINE_string(advertise_host, "", "host name or address other nodes reach us at");
DEFINE_double(model_mb, 16, "synthetic model size in MB of fp32 parameters");
DEFINE_int32(layers, 8, "synthetic model: number of layers (weight + bias tensors each)");
DEFINE_int32(iterations, 100, "training iterations");
DEFINE_string(grad, "random", "synthetic gradients: random or known (exactly checkable)");
DEFINE_int32(compute_ms, 0, "synthetic compute time per iteration, milliseconds");
DEFINE_string(init, "random", "initial parameters: random (from --seed) or zero");
DEFINE_uint64(seed, 1, "seed for initial parameters and random gradients");
DEFINE_string(dump_params, "", "after training, write the final parameters (raw fp32) here");
DEFINE_int32(log_every, 10, "print progress every this many iterations (0: never)");
DEFINE_int32(heartbeat_ms, 1000, "heartbeat period");
DEFINE_int32(register_timeout_s, 60, "give up if the scheduler does not answer in this time");
DEFINE_int32(request_timeout_s, 120, "give up on a push or pull after this time");

namespace {

void ExitIfError(const absl::Status& status, const char* what) {
  if (!status.ok()) {
    r2sp::ExitWithError(absl::Status(status.code(), absl::StrCat(what, ": ", status.message())));
  }
}

}  // namespace

int main(int argc, char** argv) {
  r2sp::InitProcess(&argc, &argv, "R2SP worker");
  r2sp::CheckFlag(FLAGS_model_mb > 0 && FLAGS_model_mb <= 16384, "--model_mb must be in (0, 16384]");
  r2sp::CheckFlag(FLAGS_layers >= 1 && FLAGS_layers <= 10000, "--layers must be in [1, 10000]");
  r2sp::CheckFlag(FLAGS_iterations >= 0, "--iterations must be >= 0");
  r2sp::CheckFlag(FLAGS_grad == "random" || FLAGS_grad == "known",
                  "--grad must be random or known");
  r2sp::CheckFlag(FLAGS_init == "random" || FLAGS_init == "zero", "--init must be random or zero");
  r2sp::CheckFlag(FLAGS_compute_ms >= 0, "--compute_ms must be >= 0");
  r2sp::CheckFlag(FLAGS_heartbeat_ms >= 10, "--heartbeat_ms must be >= 10");
  r2sp::CheckFlag(FLAGS_register_timeout_s >= 1, "--register_timeout_s must be >= 1");
  r2sp::CheckFlag(FLAGS_request_timeout_s >= 1, "--request_timeout_s must be >= 1");
  const size_t total_floats = static_cast<size_t>(FLAGS_model_mb * 1024 * 1024 / 4);
  r2sp::CheckFlag(total_floats >= 65u * FLAGS_layers,
                  "--model_mb is too small for --layers (each layer has a 64-float bias)");

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
  const std::vector<r2sp::proto::TensorSpec> model =
      r2sp::SyntheticModel(total_floats, FLAGS_layers);
  absl::StatusOr<r2sp::proto::RegisterReply> reg = scheduler.Register(r2sp::proto::WORKER, model);
  ExitIfError(reg.status(), "cannot join the job");
  const int rank = reg->rank();
  const r2sp::proto::AddressBook& book = reg->book();
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
  LOG(INFO) << "worker " << rank << ": " << layout->total_bytes() << " bytes in "
            << layout->partitions().size() << " partitions over " << servers.size()
            << " servers (" << r2sp::SyncModeName(book.sync()) << ")";

  ExitIfError(scheduler.Barrier(r2sp::proto::ALL), "waiting for the servers");
  std::vector<float> params(layout->total_elements());
  std::vector<float> grads(layout->total_elements());
  if (rank == 0) {
    if (FLAGS_init == "random") r2sp::FillInitialParams(FLAGS_seed, params.data(), params.size());
    ExitIfError(ps.Push(params.data(), 0, /*init=*/true).Wait(), "initialising the servers");
  }
  ExitIfError(scheduler.Barrier(r2sp::proto::WORKERS), "waiting for initial parameters");
  ExitIfError(ps.Pull(params.data(), 0).Wait(), "pulling initial parameters");
  if (FLAGS_grad == "random") {
    r2sp::FillRandomGradient(FLAGS_seed + 1000 + rank, grads.data(), grads.size());
  }

  const absl::Time start = absl::Now();
  absl::Duration push_time, pull_time;
  for (int clock = 0; clock < FLAGS_iterations; ++clock) {
    if (FLAGS_compute_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(FLAGS_compute_ms));
    }
    if (FLAGS_grad == "known") r2sp::FillKnownGradient(rank, clock, grads.data(), grads.size());
    absl::Time t0 = absl::Now();
    ExitIfError(ps.Push(grads.data(), clock).Wait(), "push");
    absl::Time t1 = absl::Now();
    ExitIfError(ps.Pull(params.data(), bsp ? clock + 1 : 0).Wait(), "pull");
    absl::Time t2 = absl::Now();
    push_time += t1 - t0;
    pull_time += t2 - t1;
    if (FLAGS_log_every > 0 && (clock + 1) % FLAGS_log_every == 0) {
      const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
      std::printf("worker %d: iteration %d/%d  %.1f it/s  push %.2f ms  pull %.2f ms\n", rank,
                  clock + 1, FLAGS_iterations, (clock + 1) / seconds,
                  absl::ToDoubleMilliseconds(push_time) / (clock + 1),
                  absl::ToDoubleMilliseconds(pull_time) / (clock + 1));
      std::fflush(stdout);
    }
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);

  // Every worker's last push is applied once all have passed this barrier.
  ExitIfError(scheduler.Barrier(r2sp::proto::WORKERS), "final barrier");
  ExitIfError(ps.Pull(params.data(), bsp ? FLAGS_iterations : 0).Wait(), "final pull");
  if (!FLAGS_dump_params.empty()) {
    std::string bytes(reinterpret_cast<const char*>(params.data()), params.size() * sizeof(float));
    ExitIfError(r2sp::WriteFileAtomically(FLAGS_dump_params, bytes), "writing --dump_params");
  }
  const r2sp::PsClientCounters c = ps.counters();
  r2sp::proto::NodeCounters counters;
  counters.set_bytes_pushed(c.bytes_pushed);
  counters.set_bytes_pulled(c.bytes_pulled);
  counters.set_pushes(c.pushes);
  counters.set_pulls(c.pulls);
  counters.set_iterations(FLAGS_iterations);
  counters.set_seconds(seconds);
  counters.set_dropped_messages((*transport)->counters().dropped_messages);
  ExitIfError(scheduler.Finish(counters), "reporting to the scheduler");
  scheduler.StopHeartbeats();
  (*transport)->Stop();
  std::printf("worker %d: done, %d iterations in %.2f s (%.1f it/s)\n", rank, FLAGS_iterations,
              seconds, seconds > 0 ? FLAGS_iterations / seconds : 0.0);
  return 0;
}
