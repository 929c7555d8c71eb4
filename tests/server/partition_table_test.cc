// PartitionTable (server/partition_table.h): the partitions a layout gives a server, lookups
// with their error, readiness of a pull by version and by live workers' pushes, the per-worker
// parking limit (a refused pull is left with its responder), release of ready pulls in order
// with the time each waited, and the clocks a join needs.
#include "server/partition_table.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "glog/logging.h"
#include "gtest/gtest.h"
#include "tests/testing/fakes.h"

namespace r2sp {
namespace {

using testing::RecordingSink;

// 12 floats in partitions of 4 over 2 servers: keys 0 and 2 on server 0, key 1 on server 1.
ModelLayout Layout() {
  proto::TensorSpec t;
  t.set_name("w");
  t.set_num_elements(12);
  absl::StatusOr<ModelLayout> layout = ModelLayout::Create({t}, 16, 2);
  CHECK(layout.ok()) << layout.status();
  return *layout;
}

class PartitionTableTest : public ::testing::Test {
 protected:
  // A pull of `key` by worker `rank` wanting (min_version, min_clock).
  ParkedPull Pull(uint64_t key, int rank, int64_t min_version = 0, int64_t min_clock = 0) {
    proto::Header header;
    header.set_key(key);
    ParkedPull pull{wire::PullRequest{}, absl::Time(),
                    Responder(&sink_, "w" + std::to_string(rank), header)};
    pull.request.key = key;
    pull.request.rank = rank;
    pull.request.min_version = min_version;
    pull.request.min_clock = min_clock;
    return pull;
  }
  PartitionTable::Clock Clock() {
    return [this] { return now_; };
  }

  RecordingSink sink_;
  absl::Time now_ = absl::FromUnixSeconds(100);
  const std::vector<float> zeros_ = std::vector<float>(4, 0.0f);
};

TEST_F(PartitionTableTest, HoldsTheLayoutsPartitionsOfItsServer) {
  const ModelLayout layout = Layout();
  PartitionTable table(layout, 0, 3, /*bsp=*/true, nullptr);
  EXPECT_EQ(table.rank(), 0);
  EXPECT_EQ(table.size(), 2u);
  absl::StatusOr<HeldPartition*> held = table.Find(2);
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ((*held)->state.num_elements(), 4u);
  EXPECT_EQ((*held)->pushed, (std::vector<int64_t>{0, 0, 0}));
  ASSERT_NE((*held)->aggregator, nullptr);
  EXPECT_EQ(table.Get(2), *held);
  EXPECT_EQ(table.Get(1), nullptr);
  absl::StatusOr<HeldPartition*> missing = table.Find(1);
  EXPECT_EQ(missing.status(), absl::InvalidArgumentError("key 1 is not held by server 0"));
  std::vector<uint64_t> keys;
  table.ForEach([&](uint64_t key, HeldPartition&) { keys.push_back(key); });
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, (std::vector<uint64_t>{0, 2}));
  PartitionTable asp(layout, 1, 2, /*bsp=*/false, nullptr);
  EXPECT_EQ(asp.size(), 1u);
  EXPECT_EQ((*asp.Find(1))->aggregator, nullptr);
  EXPECT_EQ(PartitionTable().size(), 0u);
}

TEST_F(PartitionTableTest, ReadyNeedsInitVersionAndLiveWorkersPushes) {
  PartitionTable table(Layout(), 0, 2, false, nullptr);
  HeldPartition& held = **table.Find(0);
  const std::vector<bool> live = {true, true};
  EXPECT_FALSE(PartitionTable::Ready(held, 0, 0, live));  // no initial value
  held.state.Init(zeros_.data());
  EXPECT_TRUE(PartitionTable::Ready(held, 0, 0, live));
  EXPECT_FALSE(PartitionTable::Ready(held, 1, 0, live));
  held.pushed = {2, 1};
  EXPECT_TRUE(PartitionTable::Ready(held, 0, 1, live));
  EXPECT_FALSE(PartitionTable::Ready(held, 0, 2, live));
  EXPECT_TRUE(PartitionTable::Ready(held, 0, 2, {true, false}));  // worker 1 departed
}

TEST_F(PartitionTableTest, ParksAtMostFourPullsPerWorkerAndPartition) {
  PartitionTable table(Layout(), 0, 2, false, nullptr);
  HeldPartition& held = **table.Find(2);
  for (int i = 0; i < PartitionTable::kMaxParkedPulls; ++i) {
    ParkedPull pull = Pull(2, 1, 1);
    ASSERT_TRUE(PartitionTable::Park(held, pull, Clock()).ok());
  }
  ParkedPull other = Pull(2, 0, 1);
  EXPECT_TRUE(PartitionTable::Park(held, other, Clock()).ok());  // another worker's
  ParkedPull fifth = Pull(2, 1, 1);
  EXPECT_EQ(PartitionTable::Park(held, fifth, Clock()),
            absl::FailedPreconditionError("worker 1 has 4 pulls of partition 2 waiting already"));
  EXPECT_EQ(held.parked_pulls.size(), 5u);
  fifth.responder.ReplyStatus(absl::OkStatus());  // still the worker's to answer
  std::vector<std::pair<std::string, Message>> replies = sink_.Take();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].first, "w1");
}

TEST_F(PartitionTableTest, ReleasesReadyPullsInOrderWithTheirWait) {
  PartitionTable table(Layout(), 0, 2, false, nullptr);
  HeldPartition& held = **table.Find(0);
  const std::vector<bool> live = {true, true};
  for (int64_t version : {2, 1, 1}) {
    ParkedPull pull = Pull(0, 0, version);
    ASSERT_TRUE(PartitionTable::Park(held, pull, Clock()).ok());
    now_ += absl::Seconds(1);
  }
  std::vector<std::pair<int64_t, double>> answered;  // (min_version, waited)
  auto answer = [&](HeldPartition& h, ParkedPull& pull, double waited) {
    EXPECT_EQ(&h, &held);
    answered.emplace_back(pull.request.min_version, waited);
  };
  PartitionTable::ReleaseReady(held, live, Clock(), answer);  // not initialised: none
  EXPECT_TRUE(answered.empty());
  held.state.Init(zeros_.data());
  held.state.Apply(SgdOptions{}, 1.0f, zeros_.data());  // version 1
  PartitionTable::ReleaseReady(held, live, Clock(), answer);
  EXPECT_EQ(answered, (std::vector<std::pair<int64_t, double>>{{1, 2.0}, {1, 1.0}}));
  ASSERT_EQ(held.parked_pulls.size(), 1u);
  EXPECT_EQ(held.parked_pulls[0].request.min_version, 2);
}

TEST_F(PartitionTableTest, ClocksAndStepsAcrossPartitions) {
  PartitionTable table(Layout(), 0, 2, true, nullptr);
  EXPECT_EQ(table.OpenClock(), 0);
  (*table.Find(2))->aggregator->ResetTo(5);
  EXPECT_EQ(table.OpenClock(), 5);
  (*table.Find(0))->pushed = {3, 7};
  (*table.Find(2))->pushed = {4, 1};
  EXPECT_EQ(table.LeadingClock({true, true}), 7);
  EXPECT_EQ(table.LeadingClock({true, false}), 4);
  (*table.Find(0))->steps = 2.5;
  (*table.Find(2))->steps = 1.5;
  EXPECT_EQ(table.Steps(), 1.5);
  EXPECT_EQ(PartitionTable().Steps(), 0.0);
  EXPECT_FALSE(table.Initialized());
  table.ForEach([&](uint64_t, HeldPartition& held) { held.state.Init(zeros_.data()); });
  EXPECT_TRUE(table.Initialized());
  table.AddWorkers(4, 6);
  EXPECT_EQ((*table.Find(0))->pushed, (std::vector<int64_t>{3, 7, 6, 6}));
  // The aggregators take the new ranks' gradients.
  EXPECT_TRUE((*table.Find(0))->aggregator->Add(3, 0, zeros_.data()).ok());
}

}  // namespace
}  // namespace r2sp
