// Checkpoints on disk (server/checkpoint_store.h) and when they are taken (checkpointer.h):
// a round trip; pruning to the newest K; a truncated, bit-flipped or unparsable newest
// checkpoint passed over (naming the file) for the previous good one; another job's, rank's or
// layout's refused; the --checkpoint_every forms; a step checkpoint's state is its step's;
// CRC-32C's check value.
#include "server/checkpoint_store.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/crc32c.h"
#include "common/model_layout.h"
#include "gtest/gtest.h"
#include "server/checkpointer.h"
#include "tests/testing/fakes.h"

namespace r2sp {
namespace {

namespace fs = std::filesystem;

class CheckpointStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::path(::testing::TempDir()) /
            (std::string("ckpt-") + ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    identity_.job_id = "job-a";
    identity_.layout_hash = 0x1234;
    identity_.server_rank = 1;
    identity_.num_servers = 2;
    identity_.sync = "asp";
  }

  static proto::ShardCheckpoint Shard(float value) {
    proto::ShardCheckpoint shard;
    proto::PartitionCheckpoint* p = shard.add_partitions();
    p->set_key(3);
    p->set_steps(value);
    const float w[4] = {value, value, value, value};
    p->set_weights(std::string(reinterpret_cast<const char*>(w), sizeof(w)));
    return shard;
  }

  std::string WriteOne(CheckpointStore& store, float value) {
    absl::StatusOr<std::string> path = store.Write(Shard(value), identity_, value, "test");
    EXPECT_TRUE(path.ok()) << path.status();
    return path.value_or("");
  }

  std::string dir_;
  CheckpointIdentity identity_;
};

TEST_F(CheckpointStoreTest, RoundTripAndPruneToTheNewestK) {
  CheckpointStore store(dir_, 1, /*keep=*/2);
  for (float v : {1.0f, 2.0f, 3.0f}) WriteOne(store, v);
  EXPECT_EQ(store.Sequences(), (std::vector<int64_t>{2, 3}));
  absl::StatusOr<LoadedCheckpoint> loaded = store.LoadLatest(identity_);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->manifest.step(), 3);
  EXPECT_EQ(loaded->manifest.job_id(), "job-a");
  EXPECT_EQ(loaded->shard.partitions(0).steps(), 3.0);
  EXPECT_TRUE(loaded->skipped.empty());
  // A new store on the same directory (a restarted server) numbers on.
  CheckpointStore again(dir_, 1, 2);
  EXPECT_NE(WriteOne(again, 4.0f).find("ckpt-00000004"), std::string::npos);
  // No temporary directories are left behind.
  for (const auto& e : fs::directory_iterator(dir_ + "/server1")) {
    EXPECT_EQ(e.path().filename().string().rfind("ckpt-", 0), 0u) << e.path();
  }
}

TEST_F(CheckpointStoreTest, DamagedNewestCheckpointFallsBackToThePreviousOne) {
  for (const std::string damage : {"truncate", "flip", "manifest"}) {
    fs::remove_all(dir_);
    CheckpointStore store(dir_, 1, 3);
    WriteOne(store, 1.0f);
    const std::string newest = WriteOne(store, 2.0f);
    const std::string shard_file = newest + "/shard.bin";
    if (damage == "truncate") {
      fs::resize_file(shard_file, fs::file_size(shard_file) - 3);
    } else if (damage == "flip") {
      std::fstream f(shard_file, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(10);
      char c;
      f.get(c);
      f.seekp(10);
      f.put(static_cast<char>(c ^ 0x10));
    } else {
      std::ofstream(newest + "/MANIFEST") << "files { name: ";
    }
    absl::StatusOr<LoadedCheckpoint> loaded = store.LoadLatest(identity_);
    ASSERT_TRUE(loaded.ok()) << damage << ": " << loaded.status();
    EXPECT_EQ(loaded->manifest.step(), 1) << damage;
    ASSERT_EQ(loaded->skipped.size(), 1u) << damage;
    EXPECT_NE(loaded->skipped[0].find(newest), std::string::npos) << loaded->skipped[0];
    // The only checkpoint damaged: a clear error, no crash.
    fs::remove_all(loaded->path);
    absl::StatusOr<LoadedCheckpoint> none = store.LoadLatest(identity_);
    EXPECT_TRUE(absl::IsNotFound(none.status())) << none.status();
    EXPECT_NE(none.status().message().find(newest), std::string::npos) << none.status();
  }
}

TEST_F(CheckpointStoreTest, AnotherJobsRanksOrLayoutsCheckpointIsRefused) {
  CheckpointStore store(dir_, 1, 3);
  WriteOne(store, 1.0f);
  CheckpointIdentity other = identity_;
  other.job_id = "job-b";
  absl::StatusOr<LoadedCheckpoint> loaded = store.LoadLatest(other);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("--job_id=job-a"), std::string::npos)
      << loaded.status();
  other = identity_;
  other.layout_hash = 99;
  EXPECT_NE(store.LoadLatest(other).status().message().find("layout"), std::string::npos);
  other = identity_;
  other.sync = "bsp";
  EXPECT_FALSE(store.LoadLatest(other).ok());
  EXPECT_TRUE(absl::IsNotFound(CheckpointStore(dir_, 0, 3).LoadLatest(identity_).status()));
}

// A server stopped (SIGTERM) before the initial parameters arrived has nothing to save: a
// checkpoint of its zeros, restored as if initialised, would overwrite the model on resume.
TEST(CheckpointerTest, NoCheckpointBeforeTheInitialParameters) {
  proto::TensorSpec t;
  t.set_name("w");
  t.set_num_elements(8);
  absl::StatusOr<ModelLayout> layout = ModelLayout::Create({t}, 16, 1);
  ASSERT_TRUE(layout.ok());
  ServerHandler handler(ServerOptions{});
  handler.Configure(0, ServerPeers{"scheduler", {"w0"}}, *layout);
  CheckpointPolicy policy;
  policy.dir = ::testing::TempDir() + "/ckpt-uninitialised";
  Checkpointer checkpointer(policy, &handler, CheckpointIdentity{});
  const absl::StatusOr<std::string> written = checkpointer.CheckpointNow("sigterm");
  EXPECT_TRUE(absl::IsFailedPrecondition(written.status())) << written.status();
  EXPECT_TRUE(checkpointer.store().Sequences().empty());
}

// --checkpoint_every=<N>steps holds the state at N steps however fast the pushes come: the
// request that reaches the due step takes the snapshot. Taken by a thread polling every 100 ms
// instead, the checkpoint held whatever step the job had reached by then (here the last, 25),
// and a server's replacement lost more than N steps of updates.
TEST(CheckpointerTest, AStepCheckpointHoldsTheStateAtItsStepWhileThePushesGoOn) {
  proto::TensorSpec t;
  t.set_name("w");
  t.set_num_elements(8);
  absl::StatusOr<ModelLayout> layout = ModelLayout::Create({t}, 16, 1);  // 2 partitions of 4
  ASSERT_TRUE(layout.ok());
  ServerOptions options;
  options.sgd = {0.5f, 0.0f, 0.0f};
  options.sync = proto::ASP;
  ServerHandler handler(options);
  handler.Configure(0, ServerPeers{"scheduler", testing::WorkerIds(1)}, *layout);
  testing::RecordingSink sink;
  const auto push = [&](uint64_t key, float value, bool init) {
    Message m = testing::WorkerRequest(proto::PUSH, 0, key);
    if (init) m.header.mutable_push()->set_init(true);
    const std::vector<float> values(4, value);
    m.payload.push_back(zmq::message_t(values.data(), values.size() * sizeof(float)));
    Responder r(&sink, "w0", m.header);
    handler.HandleRequest(std::move(m), std::move(r));
  };
  for (uint64_t key : {0, 1}) push(key, 0.0f, /*init=*/true);
  CheckpointPolicy policy;
  policy.dir = ::testing::TempDir() + "/ckpt-at-steps";
  fs::remove_all(policy.dir);
  policy.every_steps = 10;
  Checkpointer checkpointer(policy, &handler, CheckpointIdentity{});
  checkpointer.Start();
  for (int step = 0; step < 25; ++step) {
    for (uint64_t key : {0, 1}) push(key, 1.0f, /*init=*/false);  // w -= 0.5 a step
  }
  CheckpointStore store(policy.dir, 0, 3);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  absl::StatusOr<LoadedCheckpoint> latest = absl::NotFoundError("none yet");
  while (absl::Now() < deadline) {
    latest = store.LoadLatest(CheckpointIdentity{});
    if (latest.ok() && latest->shard.partitions(0).steps() >= 20) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  checkpointer.Stop();
  ASSERT_TRUE(latest.ok()) << latest.status();
  ASSERT_EQ(latest->shard.partitions_size(), 2);
  for (const proto::PartitionCheckpoint& p : latest->shard.partitions()) {
    EXPECT_EQ(p.steps(), 20.0) << p.key();
    std::vector<float> weights(4);
    ASSERT_EQ(p.weights().size(), sizeof(float) * 4);
    std::memcpy(weights.data(), p.weights().data(), p.weights().size());
    EXPECT_EQ(weights, std::vector<float>(4, -10.0f)) << p.key();
  }
}

TEST(CheckpointEveryTest, ParsesSecondsAndStepsAndRefusesTheRest) {
  CheckpointPolicy policy;
  ASSERT_TRUE(ParseCheckpointEvery("30s", &policy).ok());
  EXPECT_EQ(policy.every_time, absl::Seconds(30));
  EXPECT_EQ(policy.every_steps, 0);
  ASSERT_TRUE(ParseCheckpointEvery("0.5s", &policy).ok());
  EXPECT_EQ(policy.every_time, absl::Milliseconds(500));
  ASSERT_TRUE(ParseCheckpointEvery("200steps", &policy).ok());
  EXPECT_EQ(policy.every_steps, 200);
  EXPECT_EQ(policy.every_time, absl::ZeroDuration());
  ASSERT_TRUE(ParseCheckpointEvery("", &policy).ok());
  EXPECT_EQ(policy.every_steps, 0);
  for (const char* bad : {"30", "s", "-1s", "0s", "0steps", "1.5steps", "10m", "steps", "nans"}) {
    EXPECT_FALSE(ParseCheckpointEvery(bad, &policy).ok()) << bad;
  }
}

TEST(Crc32cTest, MatchesTheStandardCheckValueInPieces) {
  const std::string data = "123456789";
  EXPECT_EQ(Crc32c(data.data(), data.size()), 0xE3069283u);
  EXPECT_EQ(Crc32c(data.data() + 4, 5, Crc32c(data.data(), 4)), 0xE3069283u);
  EXPECT_EQ(Crc32c(nullptr, 0), 0u);
}

}  // namespace
}  // namespace r2sp
