// SchedulerOptions: what a job is (its nodes, mode, timeouts; the slot and batching options
// nested as the SlotCoordinator takes them), with
// Validate(), which the scheduler binary and every test that builds a SchedulerCore go
// through; the parsers of its string-valued flags; and CheckHeartbeatPeriod, the rule a
// registering node's heartbeat period must meet.
#ifndef R2SP_SCHEDULER_SCHEDULER_OPTIONS_H_
#define R2SP_SCHEDULER_SCHEDULER_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/messages.pb.h"
#include "scheduler/batch_tuner.h"
#include "scheduler/slot_coordinator.h"

namespace r2sp {

struct SchedulerOptions {
  int num_servers = 1;          // REQUIRES: >= 1
  int num_workers = 1;          // REQUIRES: >= 1
  // See docs/ARCHITECTURE.md (model layout). REQUIRES: a positive multiple of 4, at most
  // kMaxPartitionBytes.
  uint64_t partition_bytes = 1 << 20;
  proto::SyncMode sync = proto::ASP;
  int staleness = 3;             // ssp. REQUIRES: >= 0
  // easgd, eawild: local steps between a worker's elastic exchanges (tau; REQUIRES: >= 1) and
  // the moving rate alpha (REQUIRES: in (0, 1]; the flag's default, ParseElasticAlpha's
  // "auto", is 0.9 / num_workers as in the EASGD paper). With hetero batching a worker's
  // difference counts num_workers * b_i / B times in the centre (worker/exchanger.h).
  int elastic_period = 4;
  double elastic_alpha = 0.9;
  // The r2sp slot (--r2sp_headroom, --r2sp_slot, --r2sp_order, --r2sp_slot_width) and hetero
  // batching (--hetero_batching, --global_batch, --min_batch, --max_batch), as the
  // SlotCoordinator takes them; REQUIRES: see SlotCoordinatorOptions.
  SlotCoordinatorOptions slots;
  // A registered node silent for this long is declared dead. REQUIRES: >= 100 ms. A node whose
  // heartbeat period cannot meet it is refused at registration (CheckHeartbeatPeriod).
  absl::Duration heartbeat_timeout = absl::Seconds(3);
  // A worker whose progress count (in its heartbeats) stands still for this long, while it is
  // not waiting at a barrier or for a slot, is declared dead: it hangs although its heartbeat
  // thread runs. Zero: never. REQUIRES: >= 0.
  absl::Duration progress_timeout = absl::Seconds(120);
  // Names the job in the address book (servers' checkpoint manifests).
  std::string job_id;
  // Give up if not every node has registered within this time. REQUIRES: >= 1 s.
  absl::Duration register_timeout = absl::Seconds(120);
  // How long servers get to acknowledge SHUTDOWN.
  absl::Duration shutdown_timeout = absl::Seconds(10);
  // A pause between two ticks (normally 50 ms apart) longer than this was the scheduler's own
  // (FailureDetector::Forgive): the nodes' silence clocks skip it. InfiniteDuration: never.
  absl::Duration stall_forgiven_after = absl::Seconds(1);
  // A lost server (asp, ssp, r2sp, eawild) is awaited this long: a server registering meanwhile
  // takes its rank and restores its shard from its checkpoints, while workers hold their
  // requests to it. Zero (and always in bsp and easgd): the loss of a server fails the job.
  // REQUIRES: >= 0.
  absl::Duration server_replace_timeout = absl::ZeroDuration();
  // Survivors take over the data shards of dead workers from the next epoch on (proto
  // EpochPlan; workers ask for each epoch's plan). A joiner can then take only a shard orphaned
  // in the current epoch. Off: a dead worker's shard waits for a joiner and is not trained.
  bool absorb_orphaned_shards = false;
  // With absorb_orphaned_shards: the plans an earlier attempt of this job fixed (checked with
  // EpochPlanBook::Parse), and where to save the plans each time one is fixed (may be empty).
  // REQUIRES: both empty without absorb_orphaned_shards.
  proto::EpochPlans restored_epoch_plans;
  std::function<void(const proto::EpochPlans&)> save_epoch_plans;

  // OK, or InvalidArgument naming the first field (and its flag) that breaks a REQUIRES.
  absl::Status Validate() const;
};

// The largest partition: one message frame (TransportOptions::max_frame_bytes).
inline constexpr uint64_t kMaxPartitionBytes = uint64_t{256} << 20;

// A node beating every `period_ms` is refused unless two beats fit in `timeout`: with
// period * 2 <= timeout one late or lost heartbeat does not get a live node declared dead,
// while a node beating slower than the timeout would be declared dead between two beats.
// period_ms 0 (a node that did not say) is not checked. InvalidArgument (a bad flag: the node exits 2) naming both values.
absl::Status CheckHeartbeatPeriod(int64_t period_ms, absl::Duration timeout);

// --elastic_alpha: "auto" (beta / workers with beta = 0.9, the EASGD paper's choice) or a number
// (Validate checks its range).
absl::StatusOr<double> ParseElasticAlpha(const std::string& text, int num_workers);

// --r2sp_slot_width: "auto" (0: tuned) or a number >= 1.
absl::StatusOr<int> ParseSlotWidth(const std::string& text);
// --r2sp_order: ring, first_come, or auto (first_come with hetero batching, else ring).
absl::StatusOr<SlotOrder> ParseSlotOrder(const std::string& text, bool hetero_batching);
// --r2sp_slot: push (false) or push_pull (true): whether the slot covers the pull.
absl::StatusOr<bool> ParseSlotIncludesPull(const std::string& text);

}  // namespace r2sp

#endif  // R2SP_SCHEDULER_SCHEDULER_OPTIONS_H_
