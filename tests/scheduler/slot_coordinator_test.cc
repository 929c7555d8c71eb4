// The scheduler's r2sp and tuning part on its own: SLOT parks the responder until the turn
// comes, grants carry the tuned batch and their time, RELEASE with leaving closes the ring (the finished worker
// still counting in the gap), REPORT needs hetero batching, and a worker that leaves (dies)
// drops its pending request and stops counting.
#include "scheduler/slot_coordinator.h"

#include "gtest/gtest.h"
#include "tests/testing/fakes.h"

namespace r2sp {
namespace {

using testing::RecordingSink;

proto::IterationReport Iteration(int samples, double compute_seconds) {
  proto::IterationReport r;
  r.set_samples(samples);
  r.set_compute_seconds(compute_seconds);
  return r;
}

Responder ResponderFor(RecordingSink* sink, int rank) {
  proto::Header request;
  request.set_type(proto::SLOT);
  request.set_request_id(rank + 1);
  return Responder(sink, "worker" + std::to_string(rank), request);
}

TEST(SlotCoordinatorTest, GrantsOneAtATimeWithTheTunedBatch) {
  SlotCoordinatorOptions options;
  options.order = SlotOrder::kFirstCome;
  options.hetero_batching = true;
  options.batching.global_batch = 64;
  SlotCoordinator slots(options, /*r2sp=*/true);
  slots.SetMembers(2);
  ASSERT_NE(slots.tuner(), nullptr);
  RecordingSink sink;
  const absl::Time t0 = absl::UnixEpoch();
  slots.RequestSlot(0, Iteration(32, 0.032), ResponderFor(&sink, 0), t0);
  slots.RequestSlot(1, Iteration(32, 0.128), ResponderFor(&sink, 1), t0);
  auto replies = sink.Take();
  ASSERT_EQ(replies.size(), 1u);  // the slot is held: worker 1 waits
  EXPECT_EQ(replies[0].first, "worker0");
  EXPECT_EQ(replies[0].second.header.slot_grant().batch().batch_size(), 32);  // one report
  EXPECT_EQ(replies[0].second.header.slot_grant().granted_unix_us(), absl::ToUnixMicros(t0));
  ASSERT_TRUE(slots.Release(0, /*leaving=*/true, t0 + absl::Seconds(1)).ok());
  replies = sink.Take();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].first, "worker1");
  EXPECT_GT(replies[0].second.header.slot_grant().batch().throughput(), 0);  // measured
  // Granted at the release that freed the slot, on the scheduler's clock.
  EXPECT_EQ(replies[0].second.header.slot_grant().granted_unix_us(),
            absl::ToUnixMicros(t0 + absl::Seconds(1)));
  EXPECT_EQ(slots.planner().ring().size(), 1u);  // worker 0 left the ring
  // ... done training, so it still counts in the gap: T / (1.2 * 2), T smoothed over 32 and
  // 128 ms with the coordinator's smoothing, 0.2.
  EXPECT_EQ(slots.planner().gap(), absl::Seconds(((1 - 0.2) * 0.032 + 0.2 * 0.128) / (1.2 * 2)));
}

// --r2sp_slot_width=auto: with 4 workers whose pushes take 4 ms alone and 5 ms two at a time
// (servers with cores to spare), the slot is widened; the job report's width follows.
TEST(SlotCoordinatorTest, AutoWidthWidensWhereConcurrentPushesGetThroughSooner) {
  SlotCoordinatorOptions options;
  options.width = 0;
  options.width_tuning.window = 8;
  options.width_tuning.settle = 2;
  SlotCoordinator slots(options, /*r2sp=*/true);
  slots.SetMembers(4);
  ASSERT_NE(slots.width_tuner(), nullptr);
  RecordingSink sink;
  absl::Time now = absl::UnixEpoch();
  // Every worker asks again as soon as it has released (no compute, so no gap): the slot is
  // the limit.
  for (int rank = 0; rank < 4; ++rank) {
    slots.RequestSlot(rank, Iteration(32, 0), ResponderFor(&sink, rank), now);
  }
  for (int step = 0; step < 400; ++step) {
    std::vector<int> holders;
    for (const auto& [to, reply] : sink.Take()) holders.push_back(std::stoi(to.substr(6)));
    ASSERT_FALSE(holders.empty()) << "step " << step;
    const int concurrent = slots.planner().holders();
    now += absl::Milliseconds(concurrent == 1 ? 4 : 5);  // each holder's push
    for (int rank : holders) ASSERT_TRUE(slots.Release(rank, /*leaving=*/false, now).ok());
    for (int rank : holders) {
      slots.RequestSlot(rank, Iteration(32, 0), ResponderFor(&sink, rank), now);
    }
  }
  EXPECT_GE(slots.width_tuner()->chosen(), 2);
  EXPECT_EQ(slots.planner().width(), slots.width_tuner()->width());
  ASSERT_GT(slots.planner().grants_by_width().size(), 2u);
  EXPECT_GT(slots.planner().grants_by_width()[2], 0);
}

// A fixed --r2sp_slot_width=N: N hold the slot at once, and no tuner.
TEST(SlotCoordinatorTest, FixedWidthGrantsThatManyAtOnce) {
  SlotCoordinatorOptions options;
  options.width = 3;
  SlotCoordinator slots(options, /*r2sp=*/true);
  slots.SetMembers(4);
  EXPECT_EQ(slots.width_tuner(), nullptr);
  RecordingSink sink;
  const absl::Time t0 = absl::UnixEpoch();
  for (int rank = 0; rank < 4; ++rank) {
    slots.RequestSlot(rank, Iteration(32, 0), ResponderFor(&sink, rank), t0);
  }
  EXPECT_EQ(sink.Take().size(), 3u);
  ASSERT_TRUE(slots.Release(1, /*leaving=*/false, t0).ok());
  EXPECT_EQ(sink.Take().size(), 1u);
}

TEST(SlotCoordinatorTest, ReportsMoveSamplesToTheFasterWorker) {
  SlotCoordinatorOptions options;
  options.hetero_batching = true;
  options.batching.global_batch = 64;
  SlotCoordinator slots(options, /*r2sp=*/false);
  slots.SetMembers(2);
  int fast = 0, slow = 0;
  for (int round = 0; round < 20; ++round) {
    absl::StatusOr<proto::BatchAssignment> a = slots.Report(0, Iteration(32, 0.032));
    absl::StatusOr<proto::BatchAssignment> b = slots.Report(1, Iteration(32, 0.128));
    ASSERT_TRUE(a.ok() && b.ok());
    fast = a->batch_size();
    slow = b->batch_size();
  }
  EXPECT_GT(fast, 2 * slow) << fast << " vs " << slow;
  EXPECT_NEAR(fast + slow, 64, 1);
}

TEST(SlotCoordinatorTest, ReportNeedsHeteroBatchingAndSlotNeedsR2sp) {
  SlotCoordinator plain(SlotCoordinatorOptions{}, /*r2sp=*/false);
  plain.SetMembers(2);
  EXPECT_EQ(plain.Report(0, Iteration(8, 0.01)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  RecordingSink sink;
  plain.RequestSlot(0, Iteration(8, 0.01), ResponderFor(&sink, 0), absl::UnixEpoch());
  auto replies = sink.Take();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_NE(replies[0].second.header.code(), proto::OK);
}

TEST(SlotCoordinatorTest, AWorkerThatLeavesIsNotGranted) {
  SlotCoordinatorOptions options;
  SlotCoordinator slots(options, /*r2sp=*/true);
  slots.SetMembers(2);
  RecordingSink sink;
  const absl::Time t0 = absl::UnixEpoch();
  slots.RequestSlot(0, Iteration(8, 0.01), ResponderFor(&sink, 0), t0);
  slots.RequestSlot(1, Iteration(8, 0.01), ResponderFor(&sink, 1), t0);
  ASSERT_EQ(sink.Take().size(), 1u);  // worker 0 holds the slot
  slots.WorkerLeft(1, t0);            // worker 1 died while waiting
  ASSERT_TRUE(slots.Release(0, /*leaving=*/false, t0 + absl::Seconds(1)).ok());
  slots.GrantDue(t0 + absl::Seconds(10));
  EXPECT_TRUE(sink.Take().empty());
  EXPECT_EQ(slots.planner().ring().size(), 1u);
  // A dead worker no longer counts in the gap: T / (1.2 * 1).
  EXPECT_EQ(slots.planner().gap(), absl::Seconds(((1 - 0.2) * 0.01 + 0.2 * 0.01) / 1.2));
}

// By default (gap_holds 2) the gap is at most twice the smoothed hold: T = 120 ms over 2
// workers gives 50 ms, and once worker 0 has held the slot 20 ms the next grant is due 40 ms
// after the previous one.
TEST(SlotCoordinatorTest, TheGapIsAtMostTwiceTheHoldByDefault) {
  SlotCoordinator slots(SlotCoordinatorOptions(), /*r2sp=*/true);
  slots.SetMembers(2);
  RecordingSink sink;
  const absl::Time t0 = absl::UnixEpoch();
  slots.RequestSlot(0, Iteration(1, 0.12), ResponderFor(&sink, 0), t0);
  slots.RequestSlot(1, Iteration(1, 0.12), ResponderFor(&sink, 1), t0);
  EXPECT_EQ(slots.planner().gap(), absl::Milliseconds(50));
  ASSERT_TRUE(slots.Release(0, false, t0 + absl::Milliseconds(20)).ok());
  EXPECT_EQ(slots.planner().gap(), absl::Milliseconds(40));
  ASSERT_EQ(sink.Take().size(), 1u);  // worker 0's grant only
  slots.GrantDue(t0 + absl::Milliseconds(39));
  EXPECT_TRUE(sink.Take().empty());
  slots.GrantDue(t0 + absl::Milliseconds(40));
  auto replies = sink.Take();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].first, "worker1");
  EXPECT_EQ(replies[0].second.header.slot_grant().gap_seconds(), 0.04);
}

}  // namespace
}  // namespace r2sp

namespace r2sp {
namespace {

// SlotStats through the coordinator: a grant is due once its worker is the candidate (asked,
// the slot free) and the gap has passed; a late tick shows as latency.
TEST(SlotCoordinatorStatsTest, GrantsAreDueAtTheLaterOfCandidacyAndTheGap) {
  SlotCoordinatorOptions options;
  options.gap_holds = 0;  // the paper's gap alone: its 20 ms hold would cap it at 40 ms
  SlotCoordinator slots(options, /*r2sp=*/true);
  slots.SetMembers(2);
  RecordingSink sink;
  const absl::Time t0 = absl::UnixEpoch();
  auto at = [t0](int ms) { return t0 + absl::Milliseconds(ms); };
  // T = 120 ms, 2 workers, headroom 1.2: gap 50 ms.
  slots.RequestSlot(0, Iteration(1, 0.12), ResponderFor(&sink, 0), at(0));
  slots.RequestSlot(1, Iteration(1, 0.12), ResponderFor(&sink, 1), at(10));  // 0 holds it
  ASSERT_TRUE(slots.Release(0, false, at(20)).ok());  // 1 is the candidate, gap not passed
  EXPECT_EQ(sink.Take().size(), 1u);  // only 0's grant so far
  slots.GrantDue(at(53));  // the tick comes 3 ms after the gap passed
  EXPECT_EQ(sink.Take().size(), 1u);
  ASSERT_TRUE(slots.Release(1, false, at(60)).ok());
  slots.RequestSlot(0, Iteration(1, 0.12), ResponderFor(&sink, 0), at(200));  // asks late
  EXPECT_EQ(sink.Take().size(), 1u);
  const SlotStats& stats = slots.stats();
  EXPECT_EQ(stats.grant_latency().count(), 3);
  EXPECT_NEAR(stats.grant_latency().max(), 0.003, 1e-9);
  EXPECT_NEAR(stats.grant_latency().mean(), 0.001, 1e-9);
  ASSERT_EQ(stats.gap_bound_ratio().count(), 1);  // the late ask's grant was not gap-bound
  EXPECT_NEAR(stats.gap_bound_ratio().max(), 53.0 / 50, 1e-9);
  EXPECT_EQ(stats.max_holders(), 1);
}

}  // namespace
}  // namespace r2sp
