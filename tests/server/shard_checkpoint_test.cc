// SnapshotShard and RestoreShard (server/shard_checkpoint.h): a snapshot restores to the same
// weights, momentum, version, steps and clock, with every worker's pushes set from the steps;
// a checkpoint that does not fit the shard is refused with its exact error and changes
// nothing.
#include "server/shard_checkpoint.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "gtest/gtest.h"

namespace r2sp {
namespace {

ModelLayout Layout() {  // keys 0 and 1 on server 0, 2 floats each
  proto::TensorSpec t;
  t.set_name("w");
  t.set_num_elements(4);
  absl::StatusOr<ModelLayout> layout = ModelLayout::Create({t}, 8, 1);
  CHECK(layout.ok()) << layout.status();
  return *layout;
}

std::vector<float> Floats(const std::string& bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

// A BSP shard: key 0 at {1, 2} after one momentum update, clock 3, 2.5 steps; key 1 at {5, 6}.
class ShardCheckpointTest : public ::testing::Test {
 protected:
  ShardCheckpointTest() : layout_(Layout()), table_(layout_, 0, 2, true, nullptr) {
    HeldPartition& a = **table_.Find(0);
    const std::vector<float> w = {2, 3}, g = {2, 2};
    a.state.Init(w.data());
    a.state.Apply(SgdOptions{0.5f, 0.9f, 0.0f}, 1.0f, g.data());  // w {1, 2}, momentum {2, 2}
    a.aggregator->ResetTo(3);
    a.steps = 2.5;
    const std::vector<float> b = {5, 6};
    (*table_.Find(1))->state.Init(b.data());
  }
  const ModelLayout layout_;
  PartitionTable table_;
};

TEST_F(ShardCheckpointTest, SnapshotRestoresToTheSameState) {
  const proto::ShardCheckpoint shard = SnapshotShard(table_, /*momentum=*/true);
  ASSERT_EQ(shard.partitions_size(), 2);
  const proto::PartitionCheckpoint& p =
      shard.partitions(0).key() == 0 ? shard.partitions(0) : shard.partitions(1);
  EXPECT_EQ(p.version(), 1);
  EXPECT_EQ(p.steps(), 2.5);
  EXPECT_EQ(p.clock(), 3);
  EXPECT_EQ(Floats(p.weights()), (std::vector<float>{1, 2}));
  EXPECT_EQ(Floats(p.momentum()), (std::vector<float>{2, 2}));
  EXPECT_TRUE(SnapshotShard(table_, false).partitions(0).momentum().empty());

  PartitionTable restored(layout_, 0, 2, true, nullptr);
  ASSERT_TRUE(RestoreShard(shard, restored).ok());
  const HeldPartition& a = **restored.Find(0);
  EXPECT_EQ(std::vector<float>(a.state.weights(), a.state.weights() + 2),
            (std::vector<float>{1, 2}));
  EXPECT_EQ(std::vector<float>(a.state.momentum(), a.state.momentum() + 2),
            (std::vector<float>{2, 2}));
  EXPECT_EQ(a.state.version(), 1);
  EXPECT_EQ(a.steps, 2.5);
  EXPECT_EQ(a.restored_steps, 2.5);
  EXPECT_EQ(a.aggregator->clock(), 3);
  EXPECT_EQ(a.restored_clock, 3);
  EXPECT_EQ(a.pushed, (std::vector<int64_t>{2, 2}));  // whole steps
  EXPECT_TRUE(restored.Initialized());
}

TEST_F(ShardCheckpointTest, RefusesACheckpointThatDoesNotFitAndChangesNothing) {
  const proto::ShardCheckpoint good = SnapshotShard(table_, true);
  struct Case {
    std::string error;
    proto::ShardCheckpoint shard;
  };
  std::vector<Case> cases;
  proto::ShardCheckpoint foreign = good;
  foreign.mutable_partitions(0)->set_key(7);
  cases.push_back({"the checkpoint holds partition 7, not one of server 0's", foreign});
  proto::ShardCheckpoint twice = good;
  *twice.mutable_partitions(1) = twice.partitions(0);
  cases.push_back({absl::StrCat("partition ", good.partitions(0).key(), " twice"), twice});
  proto::ShardCheckpoint missing = good;
  missing.mutable_partitions()->RemoveLast();
  cases.push_back({"the checkpoint holds 1 of the shard's 2 partitions", missing});
  proto::ShardCheckpoint short_weights = good;
  short_weights.mutable_partitions(0)->mutable_weights()->resize(4);
  cases.push_back({absl::StrCat("partition ", good.partitions(0).key(),
                                " has 4 bytes of weights, 8 of momentum and 0 of second "
                                "moment; it needs 8"),
                   short_weights});
  proto::ShardCheckpoint short_second = good;
  short_second.mutable_partitions(0)->set_second_moment(std::string(12, '\0'));
  cases.push_back({absl::StrCat("partition ", good.partitions(0).key(),
                                " has 8 bytes of weights, 8 of momentum and 12 of second "
                                "moment; it needs 8"),
                   short_second});
  proto::ShardCheckpoint bad_steps = good;
  bad_steps.mutable_partitions(1)->set_steps(-1);
  cases.push_back(
      {absl::StrCat("partition ", good.partitions(1).key(), "'s counters are out of range"),
       bad_steps});
  PartitionTable target(layout_, 0, 2, true, nullptr);
  for (const Case& c : cases) {
    EXPECT_EQ(RestoreShard(c.shard, target), absl::InvalidArgumentError(c.error));
    EXPECT_FALSE(target.Initialized()) << c.error;
  }
}

}  // namespace
}  // namespace r2sp
