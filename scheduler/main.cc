// The `scheduler` binary: one per job. Wires the transport to SchedulerCore and waits for the
// job to end; writes the job's counters as JSON if asked.
#include <cstdio>
#include <memory>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/auth/auth_options.h"
#include "common/cli.h"
#include "common/sync_modes.h"
#include "common/durable_file.h"
#include "common/status_macros.h"
#include "common/transport.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "scheduler/epoch_plan_file.h"
#include "scheduler/realtime_priority.h"
#include "scheduler/scheduler_core.h"
#include "scheduler/scheduler_options.h"

DEFINE_string(bind, "tcp://0.0.0.0:9000",
              "ZeroMQ endpoint to listen on; port * picks a free one (see --endpoint_file)");
DEFINE_string(advertise_host, "", "host name or address other machines reach us at");
DEFINE_string(endpoint_file, "", "if set, write the endpoint nodes should use to this file");
DEFINE_int32(realtime_priority, 0, "run the scheduler's threads under SCHED_FIFO at this priority "
             "(1-99; needs CAP_SYS_NICE) so that r2sp grants do not wait for a core; 0: off");
DEFINE_int32(num_servers, 1, "servers in the job");
DEFINE_int32(num_workers, 1, "workers in the job");
DEFINE_uint64(partition_bytes, 1 << 20, "largest partition of the model, in bytes");
DEFINE_string(sync, "asp", "consistency mode: bsp, ssp, asp, r2sp, easgd or eawild "
              "(docs/MODES.md)");
DEFINE_int32(staleness, 3, "ssp: how many clocks a worker may run ahead of the slowest");
DEFINE_int32(elastic_period, 4, "easgd, eawild: local steps between a worker's elastic "
             "exchanges with the centre (tau, >= 1)");
DEFINE_string(elastic_alpha, "auto", "easgd, eawild: moving rate alpha in (0, 1] of the elastic "
              "difference alpha * (worker - centre); auto: 0.9 / workers");
DEFINE_double(r2sp_headroom, 1.2, "r2sp: gap between slot grants = T / (headroom * workers)");
DEFINE_double(r2sp_gap_holds, 2, "r2sp: the gap is at most this many times the slot's smoothed "
              "hold (grant to release), so that short pushes on a fast link do not wait a long "
              "gap; 0: T / (headroom * workers) alone, as in the R2SP paper");
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
DEFINE_int32(heartbeat_timeout_ms, 3000, "declare a node dead after this much silence; a node "
             "registers only if two of its heartbeats fit in it (--heartbeat_ms * 2 <= this)");
DEFINE_double(progress_timeout_s, 120, "declare a worker dead when its progress count stands "
              "still this long while it waits for nothing the scheduler holds (0: never)");
DEFINE_string(job_id, "", "names the job in the servers' checkpoints (default: random); a job "
              "resumed from checkpoints must be given the same one");
DEFINE_double(server_replace_s, 0, "asp, ssp, r2sp, eawild: wait this long for a replacement of "
              "a lost server, which restores its shard from its checkpoints (tools/launch "
              "--max_restarts=server:N); 0 (and always in bsp and easgd): a lost server fails "
              "the job");
DEFINE_bool(absorb_orphaned_shards, false, "survivors take over dead workers' data shards from "
            "the next epoch on, so each epoch still trains every sample once (tools/launch sets "
            "it unless workers are replaced); a joiner can take only a shard orphaned in the "
            "current epoch");
DEFINE_string(epoch_plans, "", "with --absorb_orphaned_shards: keep the epochs' plans in this "
              "file, and take up those it holds (a job resumed from checkpoints)");
DEFINE_int32(register_timeout_s, 120, "fail if not every node has registered within this time "
             "(the nodes' own wait for an answer is their --register_wait_s)");
DEFINE_string(stats_json, "", "if set, write every node's counters here at the end");
DEFINE_string(auth, "none", "none, or curve: CurveZMQ encryption and authentication with the "
              "job's keys (tools/keygen; docs/SECURITY.md)");
DEFINE_string(keys_dir, "", "with --auth=curve: the directory of the job's keys (default: "
              "$R2SP_KEYS_DIR)");

namespace {

// The plans an earlier attempt of the job saved in `path` (none if there is no such file), or
// why they cannot be taken up.
absl::StatusOr<r2sp::proto::EpochPlans> LoadEpochPlans(const std::string& path, int workers) {
  R2SP_ASSIGN_OR_RETURN(r2sp::proto::EpochPlans plans,
                        r2sp::WithContext(r2sp::LoadEpochPlanFile(path, workers), "--epoch_plans"));
  if (plans.plans_size() > 0) {
    LOG(INFO) << "took up the plans of " << plans.plans_size() << " epochs from " << path;
  }
  return plans;
}

std::string RandomJobId() {
  std::random_device rd;
  return absl::StrCat("job-", absl::Hex(rd(), absl::kZeroPad8), absl::Hex(rd(), absl::kZeroPad8));
}

// The flags as SchedulerOptions (string-valued ones parsed; checked by Validate).
absl::StatusOr<r2sp::SchedulerOptions> OptionsFromFlags() {
  r2sp::SchedulerOptions options;
  options.num_servers = FLAGS_num_servers;
  options.num_workers = FLAGS_num_workers;
  options.partition_bytes = FLAGS_partition_bytes;
  R2SP_ASSIGN_OR_RETURN(options.sync, r2sp::ParseSyncMode(FLAGS_sync));
  options.staleness = FLAGS_staleness;
  options.elastic_period = FLAGS_elastic_period;
  R2SP_ASSIGN_OR_RETURN(options.elastic_alpha,
                        r2sp::ParseElasticAlpha(FLAGS_elastic_alpha, FLAGS_num_workers));
  r2sp::SlotCoordinatorOptions& slots = options.slots;
  slots.headroom = FLAGS_r2sp_headroom;
  slots.gap_holds = FLAGS_r2sp_gap_holds;
  R2SP_ASSIGN_OR_RETURN(slots.includes_pull, r2sp::ParseSlotIncludesPull(FLAGS_r2sp_slot));
  R2SP_ASSIGN_OR_RETURN(slots.order,
                        r2sp::ParseSlotOrder(FLAGS_r2sp_order, FLAGS_hetero_batching));
  R2SP_ASSIGN_OR_RETURN(slots.width, r2sp::ParseSlotWidth(FLAGS_r2sp_slot_width));
  slots.hetero_batching = FLAGS_hetero_batching;
  slots.batching.global_batch = FLAGS_global_batch;
  slots.batching.min_batch = FLAGS_min_batch;
  slots.batching.max_batch = FLAGS_max_batch;
  options.heartbeat_timeout = absl::Milliseconds(FLAGS_heartbeat_timeout_ms);
  options.register_timeout = absl::Seconds(FLAGS_register_timeout_s);
  options.progress_timeout = absl::Seconds(FLAGS_progress_timeout_s);
  options.server_replace_timeout = absl::Seconds(FLAGS_server_replace_s);
  options.job_id = FLAGS_job_id.empty() ? RandomJobId() : FLAGS_job_id;
  options.absorb_orphaned_shards = FLAGS_absorb_orphaned_shards;
  if (!FLAGS_epoch_plans.empty()) {
    options.save_epoch_plans = [path = FLAGS_epoch_plans](const r2sp::proto::EpochPlans& plans) {
      absl::Status saved = r2sp::SaveEpochPlanFile(path, plans);
      if (!saved.ok()) LOG(ERROR) << "cannot save the epoch plans: " << saved;
    };
  }
  R2SP_RETURN_IF_ERROR(options.Validate());
  if (options.absorb_orphaned_shards && !FLAGS_epoch_plans.empty()) {
    R2SP_ASSIGN_OR_RETURN(options.restored_epoch_plans,
                          LoadEpochPlans(FLAGS_epoch_plans, options.num_workers));
  }
  return options;
}

absl::StatusOr<std::unique_ptr<r2sp::Transport>> TransportFromFlags() {
  r2sp::TransportOptions options;
  options.bind_endpoint = FLAGS_bind;
  options.advertise_host = FLAGS_advertise_host;
  r2sp::AuthOptions auth;
  auth.auth = FLAGS_auth;
  auth.keys_dir = FLAGS_keys_dir;
  R2SP_ASSIGN_OR_RETURN(options.curve, r2sp::LoadAuthKeys(auth, r2sp::proto::SCHEDULER));
  return r2sp::Transport::Create(options);
}

}  // namespace

int main(int argc, char** argv) {
  r2sp::InitProcess(&argc, &argv, "R2SP scheduler: membership, barriers, job control");
  const r2sp::SchedulerOptions options = r2sp::ValueOrExit(OptionsFromFlags());
  const absl::Status realtime = r2sp::UseRealtimePriority(FLAGS_realtime_priority);
  if (!realtime.ok()) r2sp::ExitWithError(realtime);  // before any thread: they inherit it
  std::unique_ptr<r2sp::Transport> transport = r2sp::ValueOrExit(TransportFromFlags());
  r2sp::SchedulerCore core(options, transport.get());
  transport->Start(&core);
  LOG(INFO) << "job " << options.job_id << ": scheduler listening at " << transport->endpoint()
            << ", waiting for " << options.num_servers << " servers and " << options.num_workers
            << " workers (" << r2sp::SyncModeName(options.sync) << ")";
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
