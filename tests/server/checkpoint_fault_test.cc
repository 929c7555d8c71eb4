// Checkpoints under file-system faults (tests/testing/fault_injection_env.h): when a
// checkpoint's fsync fails, its write is torn, the disk is full or its rename fails, the error
// has the exact code and names the file and the operation, no half-written checkpoint is left,
// the previous good checkpoint survives and is what a restore reads, and the next write works.
// The Checkpointer writes through its policy's Env.
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/model_layout.h"
#include "gtest/gtest.h"
#include "server/checkpoint_store.h"
#include "server/checkpointer.h"
#include "tests/testing/fault_injection_env.h"
#include "tests/testing/status_assert.h"

namespace r2sp {
namespace {

using testing::FaultInjectionEnv;
using testing::FileFault;

class CheckpointFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/ckpt_fault_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_OK(env_.RemoveAll(dir_));
    shard_dir_ = dir_ + "/server1";
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

  std::vector<std::string> Entries() {
    std::vector<std::string> names =
        env_.GetChildren(shard_dir_).value_or(std::vector<std::string>{});
    std::sort(names.begin(), names.end());
    return names;
  }

  // The temporary directory checkpoint `sequence` is written in.
  std::string Tmp(int sequence) const {
    return absl::StrCat(shard_dir_, "/.tmp-", sequence, "-", ::getpid());
  }

  FaultInjectionEnv env_;
  std::string dir_;
  std::string shard_dir_;
  CheckpointIdentity identity_;
};

TEST_F(CheckpointFaultTest, AFailedWriteKeepsThePreviousCheckpointForRestore) {
  struct Case {
    FileFault fault;
    std::string where;  // the path prefix the fault hits
    absl::StatusCode code;
    std::string message;
  };
  // Checkpoint 1 is good; each case fails one more (2, 3, 4, 5).
  const std::vector<Case> cases = {
      {FileFault::kFailedSync, Tmp(2) + "/shard.bin", absl::StatusCode::kUnavailable,
       "cannot fsync " + Tmp(2) + "/shard.bin: Input/output error"},
      {FileFault::kTornWrite, Tmp(3) + "/shard.bin", absl::StatusCode::kUnavailable,
       "cannot write " + Tmp(3) + "/shard.bin: Input/output error"},
      {FileFault::kNoSpace, Tmp(4) + "/MANIFEST", absl::StatusCode::kResourceExhausted,
       "cannot write " + Tmp(4) + "/MANIFEST: No space left on device"},
      {FileFault::kFailedRename, shard_dir_, absl::StatusCode::kUnavailable,
       "cannot rename " + Tmp(5) + " to " + shard_dir_ + "/ckpt-00000005: Input/output error"},
  };
  CheckpointStore store(dir_, 1, /*keep=*/2, &env_);
  ASSERT_OK(store.Write(Shard(1.0f), identity_, 1, "good").status());
  for (const Case& c : cases) {
    env_.Inject(c.fault, c.where);
    const absl::StatusOr<std::string> failed = store.Write(Shard(9.0f), identity_, 9, "bad");
    EXPECT_EQ(failed.status().code(), c.code) << failed.status();
    EXPECT_EQ(failed.status().message(), c.message);
    // Neither a half-written checkpoint nor its temporary directory is left, and the good one
    // is not pruned for it.
    EXPECT_EQ(Entries(), std::vector<std::string>{"ckpt-00000001"}) << c.message;
    EXPECT_EQ(store.Sequences(), std::vector<int64_t>{1});
    // A restarted server restores the good checkpoint.
    const absl::StatusOr<LoadedCheckpoint> loaded =
        CheckpointStore(dir_, 1, 2).LoadLatest(identity_);
    ASSERT_OK(loaded.status());
    EXPECT_EQ(loaded->path, shard_dir_ + "/ckpt-00000001");
    EXPECT_EQ(loaded->manifest.step(), 1);
    EXPECT_EQ(loaded->shard.partitions(0).steps(), 1.0);
    EXPECT_TRUE(loaded->skipped.empty());
  }
  EXPECT_EQ(env_.fired(), 4);
  // The file system recovered: the next checkpoint is written and restored.
  const absl::StatusOr<std::string> next = store.Write(Shard(6.0f), identity_, 6, "good");
  ASSERT_OK(next.status());
  EXPECT_EQ(*next, shard_dir_ + "/ckpt-00000006");
  EXPECT_EQ(store.LoadLatest(identity_)->manifest.step(), 6);
}

// The directory fsync after the rename fails: the error is reported, and the checkpoint, whole
// in its place, is the one a restore reads (the rename happened; only its durability is in
// doubt).
TEST_F(CheckpointFaultTest, AFailedDirectorySyncAfterTheRenameIsReported) {
  CheckpointStore store(dir_, 1, 2, &env_);
  ASSERT_OK(store.Write(Shard(1.0f), identity_, 1, "good").status());
  env_.Inject(FileFault::kFailedDirSync, shard_dir_, /*nth=*/2);  // 1st: the temporary dir's
  const absl::StatusOr<std::string> failed = store.Write(Shard(2.0f), identity_, 2, "p");
  EXPECT_EQ(failed.status(), absl::UnavailableError("cannot fsync directory " + shard_dir_ +
                                                    ": Input/output error"));
  EXPECT_EQ(store.LoadLatest(identity_)->manifest.step(), 2);
}

// The server's Checkpointer writes through CheckpointPolicy.env: a failed checkpoint of a live
// shard leaves the one before for the server that replaces it.
TEST_F(CheckpointFaultTest, TheCheckpointerWritesThroughItsPolicysEnv) {
  proto::TensorSpec t;
  t.set_name("w");
  t.set_num_elements(8);
  absl::StatusOr<ModelLayout> layout = ModelLayout::Create({t}, 16, 2);
  ASSERT_OK(layout.status());
  ServerHandler handler(ServerOptions{});
  handler.Configure(1, ServerPeers{"scheduler", {"w0"}}, *layout);
  ASSERT_OK(handler.Restore(handler.Snapshot()));  // as if the initial parameters came
  CheckpointPolicy policy;
  policy.dir = dir_;
  policy.env = &env_;
  Checkpointer checkpointer(policy, &handler, identity_);
  const absl::StatusOr<std::string> first = checkpointer.CheckpointNow("periodic");
  ASSERT_OK(first.status());
  EXPECT_EQ(*first, shard_dir_ + "/ckpt-00000001");
  env_.Inject(FileFault::kNoSpace, shard_dir_);
  const absl::StatusOr<std::string> second = checkpointer.CheckpointNow("sigterm");
  EXPECT_EQ(second.status(), absl::ResourceExhaustedError("cannot write " + Tmp(2) +
                                                          "/shard.bin: No space left on device"));
  EXPECT_EQ(env_.fired(), 1);
  const absl::StatusOr<LoadedCheckpoint> loaded = CheckpointStore(dir_, 1, 3).LoadLatest(identity_);
  ASSERT_OK(loaded.status());
  EXPECT_EQ(loaded->path, *first);
  EXPECT_EQ(loaded->manifest.reason(), "periodic");
}

}  // namespace
}  // namespace r2sp
