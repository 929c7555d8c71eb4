// common/durable_file: WriteFileAtomically replaces a file whole; when the fsync fails, the
// write is torn, the disk is full or the rename fails, the error names the file and the
// operation, the old file is intact and no temporary file is left; a failed directory fsync
// after the rename is reported with the new file in place.
#include "common/durable_file.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/fault_injection_env.h"
#include "tests/testing/status_assert.h"

namespace r2sp {
namespace {

using testing::FaultInjectionEnv;
using testing::FileFault;

class DurableFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/durable_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_OK(env_.RemoveAll(dir_));
    ASSERT_OK(env_.CreateDirs(dir_));
    path_ = dir_ + "/file";
    ASSERT_OK(WriteFileAtomically(path_, "old contents", &env_));
  }

  std::vector<std::string> Children() {
    std::vector<std::string> names = env_.GetChildren(dir_).value_or(std::vector<std::string>{});
    std::sort(names.begin(), names.end());
    return names;
  }

  FaultInjectionEnv env_;
  std::string dir_;
  std::string path_;
};

TEST_F(DurableFileTest, ReplacesTheFileWhole) {
  ASSERT_OK(WriteFileAtomically(path_, "new contents", &env_));
  EXPECT_EQ(env_.ReadFile(path_).value_or(""), "new contents");
  EXPECT_EQ(Children(), std::vector<std::string>{"file"});
}

TEST_F(DurableFileTest, AFailedWriteLeavesTheOldFileAndNoTemporary) {
  struct Case {
    FileFault fault;
    absl::StatusCode code;
    std::string message;
  };
  const std::string tmp = path_ + ".tmp";
  const std::vector<Case> cases = {
      {FileFault::kFailedSync, absl::StatusCode::kUnavailable,
       "cannot fsync " + tmp + ": Input/output error"},
      {FileFault::kTornWrite, absl::StatusCode::kUnavailable,
       "cannot write " + tmp + ": Input/output error"},
      {FileFault::kNoSpace, absl::StatusCode::kResourceExhausted,
       "cannot write " + tmp + ": No space left on device"},
      {FileFault::kFailedRename, absl::StatusCode::kUnavailable,
       "cannot rename " + tmp + " to " + path_ + ": Input/output error"},
  };
  for (const Case& c : cases) {
    env_.Inject(c.fault, dir_);
    const absl::Status s = WriteFileAtomically(path_, "new contents", &env_);
    EXPECT_EQ(s.code(), c.code) << s;
    EXPECT_EQ(s.message(), c.message);
    EXPECT_EQ(env_.ReadFile(path_).value_or(""), "old contents") << c.message;
    EXPECT_EQ(Children(), std::vector<std::string>{"file"}) << c.message;
  }
  EXPECT_EQ(env_.fired(), 4);
}

TEST_F(DurableFileTest, AFailedDirectorySyncIsReportedAfterTheRename) {
  env_.Inject(FileFault::kFailedDirSync, dir_);
  const absl::Status s = WriteFileAtomically(path_, "new contents", &env_);
  EXPECT_EQ(s, absl::UnavailableError("cannot fsync directory " + dir_ + ": Input/output error"));
  EXPECT_EQ(env_.ReadFile(path_).value_or(""), "new contents");
}

TEST(WriteAndSyncTest, WritesAndReportsTheCreateError) {
  Env* env = Env::Default();
  const std::string path = ::testing::TempDir() + "/write_and_sync";
  ASSERT_OK(WriteAndSync(env, path, "bytes"));
  EXPECT_EQ(env->ReadFile(path).value_or(""), "bytes");
  const std::string missing = ::testing::TempDir() + "/no/such/dir/f";
  EXPECT_EQ(WriteAndSync(env, missing, "x"),
            absl::NotFoundError("cannot create " + missing + ": No such file or directory"));
}

TEST(DirectoryOfTest, GivesTheParent) {
  EXPECT_EQ(DirectoryOf("a/b/c"), "a/b");
  EXPECT_EQ(DirectoryOf("c"), ".");
  EXPECT_EQ(DirectoryOf("/c"), "/");
}

}  // namespace
}  // namespace r2sp
