// The `server` binary: registers with the scheduler, holds its share of the model's
// partitions and applies the optimizer to pushed gradients until the scheduler stops it.
#include "absl/strings/str_cat.h"
#include "common/cli.h"
#include "common/model_layout.h"
#include "common/scheduler_client.h"
#include "common/transport.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "server/server_handler.h"

DEFINE_string(scheduler, "tcp://127.0.0.1:9000", "the scheduler's endpoint");
DEFINE_string(bind, "tcp://0.0.0.0:*", "ZeroMQ endpoint to listen on (* = any free port)");
DEFINE_string(advertise_host, "", "host name or address workers reach us at");
DEFINE_double(lr, 0.01, "learning rate");
DEFINE_double(momentum, 0.9, "SGD momentum (0 disables it)");
DEFINE_double(weight_decay, 0.0, "L2 weight decay");
DEFINE_int64(warmup_updates, 0, "linear learning-rate warm-up over this many global-batch steps");
DEFINE_string(lr_milestones, "", "multiply the rate by --lr_gamma after these global-batch step "
              "counts, e.g. 2000,3000 (BSP: a clock is a step; asynchronous modes: a push is b_i/B "
              "of a step, or a whole one with --noper_sample_updates)");
DEFINE_bool(per_sample_updates, true, "asp/ssp/r2sp: apply a push of b_i samples as b_i/B of a "
            "global-batch step (momentum decays per sample), so every mode shares one set of "
            "hyperparameters; false: every push is a whole SGD step (classic ASP)");
DEFINE_double(lr_gamma, 0.1, "learning-rate decay factor at each milestone");
DEFINE_int32(heartbeat_ms, 1000, "heartbeat period");
DEFINE_int32(register_timeout_s, 60, "give up if the scheduler does not answer in this time");

int main(int argc, char** argv) {
  r2sp::InitProcess(&argc, &argv, "R2SP parameter server");
  r2sp::CheckFlag(FLAGS_lr > 0, "--lr must be positive");
  r2sp::CheckFlag(FLAGS_momentum >= 0 && FLAGS_momentum < 1, "--momentum must be in [0, 1)");
  r2sp::CheckFlag(FLAGS_weight_decay >= 0, "--weight_decay must be >= 0");
  r2sp::CheckFlag(FLAGS_warmup_updates >= 0, "--warmup_updates must be >= 0");
  r2sp::CheckFlag(FLAGS_lr_gamma > 0 && FLAGS_lr_gamma <= 1, "--lr_gamma must be in (0, 1]");
  absl::StatusOr<std::vector<int64_t>> milestones = r2sp::ParseMilestones(FLAGS_lr_milestones);
  if (!milestones.ok()) r2sp::ExitWithError(milestones.status());
  r2sp::CheckFlag(FLAGS_heartbeat_ms >= 10, "--heartbeat_ms must be >= 10");
  r2sp::CheckFlag(FLAGS_register_timeout_s >= 1, "--register_timeout_s must be >= 1");

  r2sp::TransportOptions transport_options;
  transport_options.bind_endpoint = FLAGS_bind;
  transport_options.advertise_host = FLAGS_advertise_host;
  auto transport = r2sp::Transport::Create(transport_options);
  if (!transport.ok()) r2sp::ExitWithError(transport.status());

  r2sp::ServerOptions options;
  options.sgd = {static_cast<float>(FLAGS_lr), static_cast<float>(FLAGS_momentum),
                 static_cast<float>(FLAGS_weight_decay)};
  options.schedule.warmup_updates = FLAGS_warmup_updates;
  options.schedule.milestones = *milestones;
  options.schedule.gamma = static_cast<float>(FLAGS_lr_gamma);
  options.per_sample_updates = FLAGS_per_sample_updates;
  // The consistency mode comes from the scheduler's address book; the handler is built after
  // registration, so until then the transport answers requests with NOT_READY.
  (*transport)->Start(nullptr);
  r2sp::SchedulerClientOptions client_options;
  client_options.scheduler = FLAGS_scheduler;
  client_options.endpoint = (*transport)->endpoint();
  client_options.register_timeout = absl::Seconds(FLAGS_register_timeout_s);
  client_options.heartbeat_period = absl::Milliseconds(FLAGS_heartbeat_ms);
  r2sp::SchedulerClient scheduler(transport->get(), client_options);
  absl::StatusOr<r2sp::proto::RegisterReply> reg = scheduler.Register(r2sp::proto::SERVER, {});
  if (!reg.ok()) r2sp::ExitWithError(reg.status());
  const r2sp::proto::AddressBook& book = reg->book();
  std::vector<r2sp::proto::TensorSpec> model(book.model().begin(), book.model().end());
  absl::StatusOr<r2sp::ModelLayout> layout =
      r2sp::ModelLayout::Create(model, book.partition_bytes(), book.servers_size());
  if (!layout.ok()) r2sp::ExitWithError(layout.status());
  options.sync = book.sync();
  r2sp::ServerHandler handler(options);
  handler.Configure(reg->rank(), book.workers_size(), *layout);
  (*transport)->SetHandler(&handler);
  // Dead and finished workers: BSP clocks and SSP bounds stop waiting for them.
  scheduler.StartHeartbeats([&handler](const r2sp::proto::HeartbeatReply& beat) {
    std::vector<int> departed(beat.dead_workers().begin(), beat.dead_workers().end());
    departed.insert(departed.end(), beat.finished_workers().begin(), beat.finished_workers().end());
    if (!departed.empty()) handler.SetDepartedWorkers(departed);
  });
  LOG(INFO) << "server " << reg->rank() << " serving at " << (*transport)->endpoint() << " ("
            << r2sp::SyncModeName(options.sync) << ")";
  absl::Status ready = scheduler.Barrier(r2sp::proto::ALL);
  if (!ready.ok()) r2sp::ExitWithError(ready);

  handler.shutdown_requested().WaitForNotification();
  scheduler.StopHeartbeats();
  (*transport)->Stop();
  const r2sp::proto::NodeCounters c = handler.counters();
  LOG(INFO) << "server " << reg->rank() << " stopping: " << c.pushes() << " pushes ("
            << c.bytes_pushed() << " bytes), " << c.pulls() << " pulls (" << c.bytes_pulled()
            << " bytes), " << c.dropped_messages() << " rejected";
  return 0;
}
