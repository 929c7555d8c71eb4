// SchedulerOptions::Validate: one case per check, each with its exact message; the parsers of
// the string-valued flags; and CheckHeartbeatPeriod's rule on both sides of its boundary.
#include "scheduler/scheduler_options.h"

#include <functional>
#include <string>

#include "gtest/gtest.h"

namespace r2sp {
namespace {

struct Case {
  std::string name;
  std::function<void(SchedulerOptions&)> change;
  std::string message;
};

TEST(SchedulerOptionsTest, DefaultsAreValid) {
  EXPECT_TRUE(SchedulerOptions().Validate().ok()) << SchedulerOptions().Validate();
}

TEST(SchedulerOptionsTest, EachCheckNamesItsFlagAndField) {
  const std::vector<Case> cases = {
      {"servers", [](SchedulerOptions& o) { o.num_servers = 0; },
       "--num_servers (SchedulerOptions.num_servers) must be >= 1, got 0"},
      {"workers", [](SchedulerOptions& o) { o.num_workers = -2; },
       "--num_workers (SchedulerOptions.num_workers) must be >= 1, got -2"},
      {"partition_multiple", [](SchedulerOptions& o) { o.partition_bytes = 6; },
       "--partition_bytes (SchedulerOptions.partition_bytes) must be a positive multiple of 4, "
       "got 6"},
      {"partition_zero", [](SchedulerOptions& o) { o.partition_bytes = 0; },
       "--partition_bytes (SchedulerOptions.partition_bytes) must be a positive multiple of 4, "
       "got 0"},
      {"partition_frame", [](SchedulerOptions& o) { o.partition_bytes = (256u << 20) + 4; },
       "--partition_bytes (SchedulerOptions.partition_bytes) must be at most 256 MiB (the "
       "largest message frame), got 268435460"},
      {"staleness", [](SchedulerOptions& o) { o.staleness = -1; },
       "--staleness (SchedulerOptions.staleness) must be >= 0, got -1"},
      {"elastic_period", [](SchedulerOptions& o) { o.elastic_period = 0; },
       "--elastic_period (SchedulerOptions.elastic_period) must be >= 1, got 0"},
      {"elastic_alpha_zero", [](SchedulerOptions& o) { o.elastic_alpha = 0; },
       "--elastic_alpha (SchedulerOptions.elastic_alpha) must be in (0, 1], got 0"},
      {"elastic_alpha_above_one", [](SchedulerOptions& o) { o.elastic_alpha = 1.5; },
       "--elastic_alpha (SchedulerOptions.elastic_alpha) must be in (0, 1], got 1.5"},
      {"headroom", [](SchedulerOptions& o) { o.slots.headroom = 0; },
       "--r2sp_headroom (SchedulerOptions.slots.headroom) must be > 0, got 0"},
      {"gap_holds", [](SchedulerOptions& o) { o.slots.gap_holds = -1; },
       "--r2sp_gap_holds (SchedulerOptions.slots.gap_holds) must be >= 0, got -1"},
      {"slot_width", [](SchedulerOptions& o) { o.slots.width = -1; },
       "--r2sp_slot_width (SchedulerOptions.slots.width) must be >= 0 (0: auto), got -1"},
      {"min_batch", [](SchedulerOptions& o) { o.slots.batching.min_batch = 0; },
       "--min_batch (SchedulerOptions.slots.batching.min_batch) must be >= 1, got 0"},
      {"max_batch",
       [](SchedulerOptions& o) {
         o.slots.batching.min_batch = 16;
         o.slots.batching.max_batch = 8;
       },
       "--max_batch (SchedulerOptions.slots.batching.max_batch) must be >= --min_batch (16), got 8"},
      {"global_batch",
       [](SchedulerOptions& o) {
         o.slots.hetero_batching = true;
         o.num_workers = 4;
         o.slots.batching.min_batch = 8;
         o.slots.batching.max_batch = 64;
         o.slots.batching.global_batch = 16;
       },
       "--global_batch (SchedulerOptions.slots.batching.global_batch) must be between num_workers * "
       "min_batch (32) and num_workers * max_batch (256), got 16"},
      {"heartbeat", [](SchedulerOptions& o) { o.heartbeat_timeout = absl::Milliseconds(99); },
       "--heartbeat_timeout_ms (SchedulerOptions.heartbeat_timeout) must be >= 100ms, got 99ms"},
      {"register", [](SchedulerOptions& o) { o.register_timeout = absl::Milliseconds(500); },
       "--register_timeout_s (SchedulerOptions.register_timeout) must be >= 1s, got 500ms"},
      {"progress", [](SchedulerOptions& o) { o.progress_timeout = absl::Seconds(-1); },
       "--progress_timeout_s (SchedulerOptions.progress_timeout) must be >= 0, got -1s"},
      {"replace", [](SchedulerOptions& o) { o.server_replace_timeout = absl::Seconds(-2); },
       "--server_replace_s (SchedulerOptions.server_replace_timeout) must be >= 0, got -2s"},
      {"epoch_plans",
       [](SchedulerOptions& o) { o.save_epoch_plans = [](const proto::EpochPlans&) {}; },
       "--epoch_plans (SchedulerOptions.save_epoch_plans) needs --absorb_orphaned_shards"},
      {"restored_plans",
       [](SchedulerOptions& o) { o.restored_epoch_plans.add_plans(); },
       "--epoch_plans (SchedulerOptions.save_epoch_plans) needs --absorb_orphaned_shards"},
  };
  for (const Case& c : cases) {
    SchedulerOptions options;
    c.change(options);
    const absl::Status status = options.Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_EQ(status.message(), c.message) << c.name;
  }
}

TEST(SchedulerOptionsTest, HeteroBatchingBoundsAreInclusive) {
  SchedulerOptions options;
  options.slots.hetero_batching = true;
  options.num_workers = 4;
  options.slots.batching.min_batch = 8;
  options.slots.batching.max_batch = 64;
  options.slots.batching.global_batch = 32;
  EXPECT_TRUE(options.Validate().ok()) << options.Validate();
  options.slots.batching.global_batch = 256;
  EXPECT_TRUE(options.Validate().ok()) << options.Validate();
  options.slots.batching.global_batch = 257;
  EXPECT_EQ(options.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SchedulerOptionsTest, ElasticModesTakeHeteroBatching) {
  for (const proto::SyncMode sync : {proto::EASGD, proto::EAWILD}) {
    SchedulerOptions options;
    options.sync = sync;
    options.slots.hetero_batching = true;
    EXPECT_TRUE(options.Validate().ok()) << options.Validate();
  }
}

TEST(SchedulerOptionsTest, EpochPlansWithAbsorbedShardsAreValid) {
  SchedulerOptions options;
  options.absorb_orphaned_shards = true;
  options.save_epoch_plans = [](const proto::EpochPlans&) {};
  options.restored_epoch_plans.add_plans();
  EXPECT_TRUE(options.Validate().ok()) << options.Validate();
}

TEST(CheckHeartbeatPeriodTest, TwoBeatsMustFitInTheTimeout) {
  EXPECT_TRUE(CheckHeartbeatPeriod(1000, absl::Seconds(3)).ok());
  EXPECT_TRUE(CheckHeartbeatPeriod(1500, absl::Seconds(3)).ok());  // exactly two fit
  EXPECT_TRUE(CheckHeartbeatPeriod(0, absl::Seconds(3)).ok());     // not sent: not checked
  const absl::Status slow = CheckHeartbeatPeriod(1501, absl::Seconds(3));
  EXPECT_EQ(slow.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(slow.message(),
            "this node's heartbeat period (--heartbeat_ms=1501) cannot meet the scheduler's "
            "heartbeat timeout (--heartbeat_timeout_ms=3000): two heartbeats must fit in the "
            "timeout (heartbeat_ms * 2 <= heartbeat_timeout_ms), or the node is declared dead "
            "between two of them");
}

TEST(SchedulerOptionsTest, ElasticAlphaOfOneIsValid) {
  SchedulerOptions options;
  options.sync = proto::EASGD;
  options.elastic_alpha = 1;
  options.elastic_period = 1;
  EXPECT_TRUE(options.Validate().ok());
}

TEST(SchedulerFlagParsersTest, ElasticAlpha) {
  EXPECT_EQ(*ParseElasticAlpha("auto", 4), 0.9 / 4);  // beta / W, beta = 0.9
  EXPECT_EQ(*ParseElasticAlpha("auto", 1), 0.9);
  EXPECT_EQ(*ParseElasticAlpha("0.25", 4), 0.25);
  EXPECT_EQ(*ParseElasticAlpha("2", 4), 2.0);  // a number: Validate checks its range
  const absl::StatusOr<double> bad = ParseElasticAlpha("half", 4);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "--elastic_alpha must be auto or a number in (0, 1], got 'half'");
}

TEST(SchedulerFlagParsersTest, SlotWidth) {
  EXPECT_EQ(*ParseSlotWidth("auto"), 0);
  EXPECT_EQ(*ParseSlotWidth("3"), 3);
  for (const char* bad : {"0", "-1", "wide", ""}) {
    const absl::StatusOr<int> width = ParseSlotWidth(bad);
    EXPECT_EQ(width.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(width.status().message(),
              std::string("--r2sp_slot_width must be auto or a number >= 1, got '") + bad + "'");
  }
}

TEST(SchedulerFlagParsersTest, SlotOrder) {
  EXPECT_EQ(*ParseSlotOrder("ring", true), SlotOrder::kRing);
  EXPECT_EQ(*ParseSlotOrder("first_come", false), SlotOrder::kFirstCome);
  EXPECT_EQ(*ParseSlotOrder("auto", false), SlotOrder::kRing);
  EXPECT_EQ(*ParseSlotOrder("auto", true), SlotOrder::kFirstCome);
  const absl::Status bad = ParseSlotOrder("random", false).status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), "--r2sp_order must be ring, first_come or auto, got 'random'");
}

TEST(SchedulerFlagParsersTest, SlotIncludesPull) {
  EXPECT_FALSE(*ParseSlotIncludesPull("push"));
  EXPECT_TRUE(*ParseSlotIncludesPull("push_pull"));
  const absl::Status bad = ParseSlotIncludesPull("pull").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), "--r2sp_slot must be push or push_pull, got 'pull'");
}

}  // namespace
}  // namespace r2sp
