// tests/testing/fault_injection_env: each fault fires on the Nth matching call only, once, for
// paths under its prefix, with the error a real file system would give; a torn write or a
// full disk leaves half the data in the file; everything else reaches the target Env.
#include "tests/testing/fault_injection_env.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "tests/testing/status_assert.h"

namespace r2sp::testing {
namespace {

class FaultInjectionEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/fault_env_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_OK(env_.RemoveAll(dir_));
    ASSERT_OK(env_.CreateDirs(dir_));
  }

  // Creates `name` in dir_, appends `data` and syncs: the first error, or OK.
  absl::Status Write(const std::string& name, const std::string& data) {
    absl::StatusOr<std::unique_ptr<WritableFile>> file = env_.NewWritableFile(dir_ + "/" + name);
    if (!file.ok()) return file.status();
    absl::Status s = (*file)->Append(data);
    if (s.ok()) s = (*file)->Sync();
    const absl::Status closed = (*file)->Close();
    return s.ok() ? closed : s;
  }

  std::string Read(const std::string& name) {
    return env_.ReadFile(dir_ + "/" + name).value_or("<unreadable>");
  }

  FaultInjectionEnv env_;
  std::string dir_;
};

TEST_F(FaultInjectionEnvTest, FailsOnlyTheNthMatchingSyncOnce) {
  env_.Inject(FileFault::kFailedSync, dir_ + "/a", /*nth=*/2);
  ASSERT_OK(Write("b", "x"));   // another prefix: not counted
  ASSERT_OK(Write("a1", "x"));  // the first matching sync
  const absl::Status failed = Write("a2", "data");
  EXPECT_EQ(failed.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(failed.message(), "cannot fsync " + dir_ + "/a2: Input/output error");
  EXPECT_EQ(Read("a2"), "data");  // written, not synced
  EXPECT_EQ(env_.fired(), 1);
  ASSERT_OK(Write("a3", "x"));  // fired once, gone
  EXPECT_EQ(env_.fired(), 1);
}

TEST_F(FaultInjectionEnvTest, TornWriteAndFullDiskLeaveHalfTheData) {
  env_.Inject(FileFault::kTornWrite, dir_);
  const absl::Status torn = Write("torn", "abcdefgh");
  EXPECT_EQ(torn.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(torn.message(), "cannot write " + dir_ + "/torn: Input/output error");
  EXPECT_EQ(Read("torn"), "abcd");
  env_.Inject(FileFault::kNoSpace, dir_);
  const absl::Status full = Write("full", "0123456789");
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(full.message(), "cannot write " + dir_ + "/full: No space left on device");
  EXPECT_EQ(Read("full"), "01234");
  EXPECT_EQ(env_.fired(), 2);
}

TEST_F(FaultInjectionEnvTest, FailedRenameAndDirectorySyncChangeNothing) {
  ASSERT_OK(Write("from", "new"));
  ASSERT_OK(Write("to", "old"));
  env_.Inject(FileFault::kFailedRename, dir_ + "/to");
  const absl::Status renamed = env_.RenameFile(dir_ + "/from", dir_ + "/to");
  EXPECT_EQ(renamed.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(renamed.message(),
            "cannot rename " + dir_ + "/from to " + dir_ + "/to: Input/output error");
  EXPECT_EQ(Read("to"), "old");
  EXPECT_EQ(Read("from"), "new");
  env_.Inject(FileFault::kFailedDirSync, dir_);
  const absl::Status synced = env_.SyncDir(dir_);
  EXPECT_EQ(synced.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(synced.message(), "cannot fsync directory " + dir_ + ": Input/output error");
  // Fired once each: the same calls now succeed.
  ASSERT_OK(env_.RenameFile(dir_ + "/from", dir_ + "/to"));
  EXPECT_EQ(Read("to"), "new");
  ASSERT_OK(env_.SyncDir(dir_));
  EXPECT_EQ(env_.fired(), 2);
}

TEST_F(FaultInjectionEnvTest, ClearDropsFaultsNotYetFired) {
  env_.Inject(FileFault::kFailedSync, dir_);
  env_.Inject(FileFault::kTornWrite, dir_);
  env_.Clear();
  ASSERT_OK(Write("f", "whole"));
  EXPECT_EQ(Read("f"), "whole");
  EXPECT_EQ(env_.fired(), 0);
}

}  // namespace
}  // namespace r2sp::testing
