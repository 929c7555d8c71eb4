// See scheduler_options.h.
#include "scheduler/scheduler_options.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/option_checker.h"

namespace r2sp {

absl::Status SchedulerOptions::Validate() const {
  OptionChecker c("SchedulerOptions");
  c.Check(num_servers >= 1, "--num_servers", "num_servers", ">= 1", num_servers);
  c.Check(num_workers >= 1, "--num_workers", "num_workers", ">= 1", num_workers);
  c.Check(partition_bytes >= 4 && partition_bytes % 4 == 0, "--partition_bytes",
          "partition_bytes", "a positive multiple of 4", partition_bytes);
  c.Check(partition_bytes <= kMaxPartitionBytes, "--partition_bytes", "partition_bytes",
          "at most 256 MiB (the largest message frame)", partition_bytes);
  c.Check(staleness >= 0, "--staleness", "staleness", ">= 0", staleness);
  c.Check(elastic_period >= 1, "--elastic_period", "elastic_period", ">= 1", elastic_period);
  c.Check(elastic_alpha > 0 && elastic_alpha <= 1, "--elastic_alpha", "elastic_alpha",
          "in (0, 1]", elastic_alpha);
  c.Check(slots.headroom > 0, "--r2sp_headroom", "slots.headroom", "> 0", slots.headroom);
  c.Check(slots.gap_holds >= 0, "--r2sp_gap_holds", "slots.gap_holds", ">= 0", slots.gap_holds);
  c.Check(slots.width >= 0, "--r2sp_slot_width", "slots.width", ">= 0 (0: auto)", slots.width);
  const BatchTunerOptions& batching = slots.batching;
  c.Check(batching.min_batch >= 1, "--min_batch", "slots.batching.min_batch", ">= 1",
          batching.min_batch);
  c.Check(batching.min_batch <= batching.max_batch, "--max_batch", "slots.batching.max_batch",
          absl::StrCat(">= --min_batch (", batching.min_batch, ")"), batching.max_batch);
  if (slots.hetero_batching) {
    const int64_t lo = int64_t{num_workers} * batching.min_batch;
    const int64_t hi = int64_t{num_workers} * batching.max_batch;
    c.Check(batching.global_batch >= lo && batching.global_batch <= hi, "--global_batch",
            "slots.batching.global_batch",
            absl::StrCat("between num_workers * min_batch (", lo, ") and num_workers * "
                         "max_batch (", hi, ")"),
            batching.global_batch);
  }
  c.Check(heartbeat_timeout >= absl::Milliseconds(100), "--heartbeat_timeout_ms",
          "heartbeat_timeout", ">= 100ms", heartbeat_timeout);
  c.Check(register_timeout >= absl::Seconds(1), "--register_timeout_s", "register_timeout",
          ">= 1s", register_timeout);
  c.Check(progress_timeout >= absl::ZeroDuration(), "--progress_timeout_s", "progress_timeout",
          ">= 0", progress_timeout);
  c.Check(server_replace_timeout >= absl::ZeroDuration(), "--server_replace_s",
          "server_replace_timeout", ">= 0", server_replace_timeout);
  c.Require(absorb_orphaned_shards ||
                (!save_epoch_plans && restored_epoch_plans.plans_size() == 0),
            "--epoch_plans", "save_epoch_plans", "needs --absorb_orphaned_shards");
  return c.status();
}

absl::Status CheckHeartbeatPeriod(int64_t period_ms, absl::Duration timeout) {
  if (period_ms <= 0 || absl::Milliseconds(2 * period_ms) <= timeout) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "this node's heartbeat period (--heartbeat_ms=", period_ms,
      ") cannot meet the scheduler's heartbeat timeout (--heartbeat_timeout_ms=",
      absl::ToInt64Milliseconds(timeout),
      "): two heartbeats must fit in the timeout (heartbeat_ms * 2 <= heartbeat_timeout_ms), "
      "or the node is declared dead between two of them"));
}

absl::StatusOr<double> ParseElasticAlpha(const std::string& text, int num_workers) {
  if (text == "auto") return 0.9 / std::max(1, num_workers);
  double alpha = 0;
  if (absl::SimpleAtod(text, &alpha)) return alpha;
  return absl::InvalidArgumentError(
      absl::StrCat("--elastic_alpha must be auto or a number in (0, 1], got '", text, "'"));
}

absl::StatusOr<int> ParseSlotWidth(const std::string& text) {
  if (text == "auto") return 0;
  int width = 0;
  if (absl::SimpleAtoi(text, &width) && width >= 1) return width;
  return absl::InvalidArgumentError(
      absl::StrCat("--r2sp_slot_width must be auto or a number >= 1, got '", text, "'"));
}

absl::StatusOr<SlotOrder> ParseSlotOrder(const std::string& text, bool hetero_batching) {
  if (text == "ring") return SlotOrder::kRing;
  if (text == "first_come") return SlotOrder::kFirstCome;
  if (text == "auto") return hetero_batching ? SlotOrder::kFirstCome : SlotOrder::kRing;
  return absl::InvalidArgumentError(
      absl::StrCat("--r2sp_order must be ring, first_come or auto, got '", text, "'"));
}

absl::StatusOr<bool> ParseSlotIncludesPull(const std::string& text) {
  if (text == "push") return false;
  if (text == "push_pull") return true;
  return absl::InvalidArgumentError(
      absl::StrCat("--r2sp_slot must be push or push_pull, got '", text, "'"));
}

}  // namespace r2sp
