// The `scheduler` binary: one per job. Wires the transport to SchedulerCore and waits for the
// job to end; writes the job's counters as JSON if asked.
#include <cstdio>
#include <memory>
#include <random>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/auth/auth_flags.h"
#include "common/cli.h"
#include "common/durable_file.h"
#include "common/status_macros.h"
#include "common/transport.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "scheduler/epoch_plan_file.h"
#include "scheduler/scheduler_core.h"

DEFINE_string(bind, "tcp://0.0.0.0:9000",
              "ZeroMQ endpoint to listen on; port * picks a free one (see --endpoint_file)");
DEFINE_string(advertise_host, "", "host name or address other machines reach us at");
DEFINE_string(endpoint_file, "", "if set, write the endpoint nodes should use to this file");
DEFINE_int32(num_servers, 1, "servers in the job");
DEFINE_int32(num_workers, 1, "workers in the job");
DEFINE_uint64(partition_bytes, 1 << 20, "largest partition of the model, in bytes");
DEFINE_string(sync, "asp", "consistency mode: bsp, ssp, asp or r2sp (docs/MODES.md)");
DEFINE_int32(staleness, 3, "ssp: how many clocks a worker may run ahead of the slowest");
DEFINE_double(r2sp_headroom, 1.2, "r2sp: gap between slot grants = T / (headroom * workers)");
DEFINE_string(r2sp_slot, "push", "r2sp: what a slot covers: push (released once the push is "
              "acknowledged, so the next worker's push overlaps this one's pull) or push_pull "
              "(released after the pull too, as in the R2SP paper)");
DEFINE_string(r2sp_order, "auto", "r2sp: who gets the free slot: ring (the next worker in rank "
              "order, as in the R2SP paper), first_come (whoever asked first), or auto "
              "(first_come with --hetero_batching, else ring)");
DEFINE_string(r2sp_slot_width, "1", "r2sp: how many workers may hold the slot at once: 1 (pushes "
              "never collide, as in the R2SP paper), N, or auto (tuned from the slot's measured "
              "throughput: wider only where concurrent pushes get through sooner, docs/MODES.md)");
DEFINE_bool(hetero_batching, false, "tune each worker's batch size to its measured throughput");
DEFINE_int32(global_batch, 256, "hetero batching: the sum of all workers' batch sizes");
DEFINE_int32(min_batch, 8, "hetero batching: smallest batch a worker is given");
DEFINE_int32(max_batch, 4096, "hetero batching: largest batch a worker is given");
DEFINE_int32(heartbeat_timeout_ms, 3000, "declare a node dead after this much silence");
DEFINE_double(progress_timeout_s, 120, "declare a worker dead when its progress count stands "
              "still this long while it waits for nothing the scheduler holds (0: never)");
DEFINE_string(job_id, "", "names the job in the servers' checkpoints (default: random); a job "
              "resumed from checkpoints must be given the same one");
DEFINE_double(server_replace_s, 0, "asp, ssp, r2sp: wait this long for a replacement of a lost "
              "server, which restores its shard from its checkpoints (tools/launch "
              "--max_restarts=server:N); 0: a lost server fails the job");
DEFINE_bool(absorb_orphaned_shards, false, "survivors take over dead workers' data shards from "
            "the next epoch on, so each epoch still trains every sample once (tools/launch sets "
            "it unless workers are replaced); a joiner can take only a shard orphaned in the "
            "current epoch");
DEFINE_string(epoch_plans, "", "with --absorb_orphaned_shards: keep the epochs' plans in this "
              "file, and take up those it holds (a job resumed from checkpoints)");
DEFINE_int32(register_timeout_s, 120, "fail if the job is not complete within this time");
DEFINE_string(stats_json, "", "if set, write every node's counters here at the end");

namespace {

// --r2sp_slot_width: N >= 1, 0 for auto, -1 if it is neither.
int SlotWidthFromFlag() {
  if (FLAGS_r2sp_slot_width == "auto") return 0;
  int width = 0;
  return absl::SimpleAtoi(FLAGS_r2sp_slot_width, &width) && width >= 1 ? width : -1;
}

// Exits with a usage error unless the flags make a job; returns the sync mode.
r2sp::proto::SyncMode CheckFlags() {
  r2sp::CheckFlag(FLAGS_num_servers >= 1, "--num_servers must be at least 1");
  r2sp::CheckFlag(FLAGS_num_workers >= 1, "--num_workers must be at least 1");
  r2sp::CheckFlag(FLAGS_partition_bytes >= 4 && FLAGS_partition_bytes % 4 == 0,
                  "--partition_bytes must be a positive multiple of 4");
  r2sp::CheckFlag(FLAGS_partition_bytes <= r2sp::TransportOptions().max_frame_bytes,
                  "--partition_bytes must be at most 256 MiB (the largest message frame)");
  r2sp::CheckFlag(FLAGS_heartbeat_timeout_ms >= 100, "--heartbeat_timeout_ms must be >= 100");
  r2sp::CheckFlag(FLAGS_register_timeout_s >= 1, "--register_timeout_s must be >= 1");
  r2sp::CheckFlag(FLAGS_progress_timeout_s >= 0, "--progress_timeout_s must be >= 0");
  r2sp::CheckFlag(FLAGS_server_replace_s >= 0, "--server_replace_s must be >= 0");
  r2sp::CheckFlag(FLAGS_epoch_plans.empty() || FLAGS_absorb_orphaned_shards,
                  "--epoch_plans needs --absorb_orphaned_shards");
  const r2sp::proto::SyncMode sync = r2sp::ValueOrExit(r2sp::ParseSyncMode(FLAGS_sync));
  r2sp::CheckFlag(FLAGS_staleness >= 0, "--staleness must be >= 0");
  r2sp::CheckFlag(FLAGS_r2sp_headroom > 0, "--r2sp_headroom must be > 0");
  r2sp::CheckFlag(FLAGS_r2sp_slot == "push" || FLAGS_r2sp_slot == "push_pull",
                  "--r2sp_slot must be push or push_pull");
  r2sp::CheckFlag(FLAGS_r2sp_order == "ring" || FLAGS_r2sp_order == "first_come" ||
                      FLAGS_r2sp_order == "auto",
                  "--r2sp_order must be ring, first_come or auto");
  r2sp::CheckFlag(SlotWidthFromFlag() >= 0, "--r2sp_slot_width must be auto or a number >= 1");
  r2sp::CheckFlag(FLAGS_min_batch >= 1 && FLAGS_min_batch <= FLAGS_max_batch,
                  "need 1 <= --min_batch <= --max_batch");
  if (FLAGS_hetero_batching) {
    r2sp::CheckFlag(FLAGS_global_batch >= FLAGS_num_workers * FLAGS_min_batch &&
                        FLAGS_global_batch <= static_cast<int64_t>(FLAGS_num_workers) * FLAGS_max_batch,
                    "--global_batch must lie between num_workers * min_batch and "
                    "num_workers * max_batch");
  }
  return sync;
}

// The plans an earlier attempt of the job saved in `path` (none if there is no such file);
// exits with a clear error if the file cannot be read or is not plans for this job.
r2sp::proto::EpochPlans LoadEpochPlans(const std::string& path, int workers) {
  r2sp::proto::EpochPlans plans =
      r2sp::ValueOrExit(r2sp::WithContext(r2sp::LoadEpochPlanFile(path, workers), "--epoch_plans"));
  if (plans.plans_size() > 0) {
    LOG(INFO) << "took up the plans of " << plans.plans_size() << " epochs from " << path;
  }
  return plans;
}

r2sp::SchedulerOptions OptionsFromFlags(r2sp::proto::SyncMode sync) {
  r2sp::SchedulerOptions options;
  options.num_servers = FLAGS_num_servers;
  options.num_workers = FLAGS_num_workers;
  options.partition_bytes = FLAGS_partition_bytes;
  options.sync = sync;
  options.staleness = FLAGS_staleness;
  options.r2sp_headroom = FLAGS_r2sp_headroom;
  options.r2sp_slot_includes_pull = FLAGS_r2sp_slot == "push_pull";
  const bool first_come = FLAGS_r2sp_order == "first_come" ||
                          (FLAGS_r2sp_order == "auto" && FLAGS_hetero_batching);
  options.r2sp_order = first_come ? r2sp::SlotOrder::kFirstCome : r2sp::SlotOrder::kRing;
  options.r2sp_slot_width = SlotWidthFromFlag();
  options.hetero_batching = FLAGS_hetero_batching;
  options.batching.global_batch = FLAGS_global_batch;
  options.batching.min_batch = FLAGS_min_batch;
  options.batching.max_batch = FLAGS_max_batch;
  options.heartbeat_timeout = absl::Milliseconds(FLAGS_heartbeat_timeout_ms);
  options.register_timeout = absl::Seconds(FLAGS_register_timeout_s);
  options.progress_timeout = absl::Seconds(FLAGS_progress_timeout_s);
  options.server_replace_timeout = absl::Seconds(FLAGS_server_replace_s);
  options.job_id = FLAGS_job_id;
  options.absorb_orphaned_shards = FLAGS_absorb_orphaned_shards;
  if (options.absorb_orphaned_shards && !FLAGS_epoch_plans.empty()) {
    options.restored_epoch_plans = LoadEpochPlans(FLAGS_epoch_plans, options.num_workers);
    options.save_epoch_plans = [path = FLAGS_epoch_plans](const r2sp::proto::EpochPlans& plans) {
      absl::Status saved = r2sp::SaveEpochPlanFile(path, plans);
      if (!saved.ok()) LOG(ERROR) << "cannot save the epoch plans: " << saved;
    };
  }
  if (options.job_id.empty()) {
    std::random_device rd;
    options.job_id = absl::StrCat("job-", absl::Hex(rd(), absl::kZeroPad8),
                                  absl::Hex(rd(), absl::kZeroPad8));
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  r2sp::InitProcess(&argc, &argv, "R2SP scheduler: membership, barriers, job control");
  const r2sp::SchedulerOptions options = OptionsFromFlags(CheckFlags());
  r2sp::TransportOptions transport_options;
  transport_options.bind_endpoint = FLAGS_bind;
  transport_options.advertise_host = FLAGS_advertise_host;
  transport_options.curve = r2sp::ValueOrExit(r2sp::CurveKeysFromFlags(r2sp::proto::SCHEDULER));
  std::unique_ptr<r2sp::Transport> transport =
      r2sp::ValueOrExit(r2sp::Transport::Create(transport_options));
  r2sp::SchedulerCore core(options, transport.get());
  transport->Start(&core);
  LOG(INFO) << "job " << options.job_id << ": scheduler listening at " << transport->endpoint() << ", waiting for "
            << FLAGS_num_servers << " servers and " << FLAGS_num_workers << " workers ("
            << r2sp::SyncModeName(options.sync) << ")";
  if (!FLAGS_endpoint_file.empty()) {
    absl::Status written =
        r2sp::WriteFileAtomically(FLAGS_endpoint_file, transport->endpoint() + "\n");
    if (!written.ok()) r2sp::ExitWithError(written);
  }

  core.done().WaitForNotification();
  const std::string failure = core.failure();
  if (!failure.empty()) {
    // Every node's next heartbeat hears that the job failed, so each stops now (servers after
    // a checkpoint) instead of waiting to find the scheduler gone.
    absl::SleepFor(options.heartbeat_timeout);
  }
  transport->Stop();
  if (!FLAGS_stats_json.empty()) {
    absl::Status written = r2sp::WriteFileAtomically(FLAGS_stats_json, core.ReportJson());
    if (!written.ok()) LOG(ERROR) << written;
  }
  if (!failure.empty()) r2sp::ExitWithError(absl::FailedPreconditionError(failure));
  LOG(INFO) << "job finished";
  return 0;
}
