// common/env: the POSIX Env writes, reads, lists, renames and removes files and directories;
// its errors carry errno's code and name the operation and the file; EnvWrapper forwards
// every call to its target.
#include "common/env.h"

#include <algorithm>
#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/status_assert.h"

namespace r2sp {
namespace {

class EnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/env_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_OK(env_->RemoveAll(dir_));
  }

  absl::Status Write(const std::string& path, const std::string& data) {
    absl::StatusOr<std::unique_ptr<WritableFile>> file = env_->NewWritableFile(path);
    if (!file.ok()) return file.status();
    absl::Status s = (*file)->Append(data);
    if (s.ok()) s = (*file)->Sync();
    if (s.ok()) s = (*file)->Close();
    return s;
  }

  std::vector<std::string> Children(const std::string& dir) {
    std::vector<std::string> names = env_->GetChildren(dir).value_or(std::vector<std::string>{});
    std::sort(names.begin(), names.end());
    return names;
  }

  Env* env_ = Env::Default();
  std::string dir_;
};

TEST_F(EnvTest, WritesReadsListsRenamesAndRemoves) {
  ASSERT_OK(env_->CreateDirs(dir_ + "/a/b"));
  ASSERT_OK(env_->CreateDirs(dir_ + "/a/b"));  // already there: OK
  EXPECT_TRUE(env_->IsDirectory(dir_ + "/a/b"));
  ASSERT_OK(Write(dir_ + "/a/f", "first"));
  ASSERT_OK(Write(dir_ + "/a/f", "2nd"));  // truncated, not appended to
  EXPECT_EQ(env_->ReadFile(dir_ + "/a/f").value_or(""), "2nd");
  EXPECT_FALSE(env_->IsDirectory(dir_ + "/a/f"));
  const std::string big(200000, 'z');  // more than one read's buffer
  ASSERT_OK(Write(dir_ + "/a/big", big));
  EXPECT_EQ(env_->ReadFile(dir_ + "/a/big").value_or(""), big);
  EXPECT_EQ(Children(dir_ + "/a"), (std::vector<std::string>{"b", "big", "f"}));
  ASSERT_OK(env_->RenameFile(dir_ + "/a/f", dir_ + "/a/big"));  // replaces
  EXPECT_EQ(env_->ReadFile(dir_ + "/a/big").value_or(""), "2nd");
  ASSERT_OK(env_->SyncDir(dir_ + "/a"));
  ASSERT_OK(env_->RemoveAll(dir_ + "/a/big"));
  EXPECT_EQ(Children(dir_ + "/a"), (std::vector<std::string>{"b"}));
  ASSERT_OK(env_->RemoveAll(dir_ + "/a"));  // a tree
  ASSERT_OK(env_->RemoveAll(dir_ + "/a"));  // not there: OK
  EXPECT_FALSE(env_->IsDirectory(dir_ + "/a"));
}

TEST_F(EnvTest, ErrorsNameTheOperationAndTheFileWithErrnosCode) {
  const std::string missing = dir_ + "/missing";
  const absl::Status read = env_->ReadFile(missing).status();
  EXPECT_EQ(read.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(read.message(), "cannot open " + missing + ": No such file or directory");
  const absl::Status listed = env_->GetChildren(missing).status();
  EXPECT_EQ(listed.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(listed.message(), "cannot list " + missing + ": No such file or directory");
  const absl::Status created = env_->NewWritableFile(missing + "/f").status();
  EXPECT_EQ(created.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(created.message(), "cannot create " + missing + "/f: No such file or directory");
  const absl::Status renamed = env_->RenameFile(missing, dir_ + "/to");
  EXPECT_EQ(renamed.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(renamed.message(),
            "cannot rename " + missing + " to " + dir_ + "/to: No such file or directory");
  const absl::Status synced = env_->SyncDir(missing);
  EXPECT_EQ(synced.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(synced.message(), "cannot open directory " + missing + ": No such file or directory");
  ASSERT_OK(Write(dir_ + "-file", "x"));  // a file where a directory must go
  const absl::Status mkdir = env_->CreateDirs(dir_ + "-file/sub");
  EXPECT_EQ(mkdir.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(mkdir.message(), "cannot create directory " + dir_ + "-file/sub: Not a directory");
}

TEST(FileErrorTest, MapsErrnoToACodeAndNamesTheFile) {
  EXPECT_EQ(FileError("write", "/p", ENOSPC),
            absl::ResourceExhaustedError("cannot write /p: No space left on device"));
  EXPECT_EQ(FileError("fsync", "/p", EIO),
            absl::UnavailableError("cannot fsync /p: Input/output error"));
  EXPECT_EQ(FileError("write", "/p", EDQUOT),
            absl::ResourceExhaustedError("cannot write /p: Disk quota exceeded"));
  EXPECT_EQ(FileError("open", "/p", EACCES),
            absl::PermissionDeniedError("cannot open /p: Permission denied"));
  EXPECT_EQ(FileError("create", "/p", EROFS),
            absl::PermissionDeniedError("cannot create /p: Read-only file system"));
  EXPECT_EQ(FileError("open", "/p", ENOENT),
            absl::NotFoundError("cannot open /p: No such file or directory"));
  EXPECT_EQ(FileError("list", "/p", ENOTDIR),
            absl::UnavailableError("cannot list /p: Not a directory"));
}

// Counts the calls that reach it, answering each as the POSIX Env would not.
class CountingEnv : public Env {
 public:
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string&) override {
    return Count(absl::UnimplementedError("new"));
  }
  absl::StatusOr<std::string> ReadFile(const std::string& path) override {
    ++calls;
    return "read " + path;
  }
  absl::StatusOr<std::vector<std::string>> GetChildren(const std::string& dir) override {
    ++calls;
    return std::vector<std::string>{dir};
  }
  bool IsDirectory(const std::string&) override {
    ++calls;
    return true;
  }
  absl::Status CreateDirs(const std::string&) override { return Count(absl::AbortedError("c")); }
  absl::Status RenameFile(const std::string&, const std::string&) override {
    return Count(absl::AbortedError("r"));
  }
  absl::Status RemoveAll(const std::string&) override { return Count(absl::AbortedError("x")); }
  absl::Status SyncDir(const std::string&) override { return Count(absl::AbortedError("s")); }

  int calls = 0;

 private:
  absl::Status Count(absl::Status s) {
    ++calls;
    return s;
  }
};

TEST(EnvWrapperTest, ForwardsEveryCall) {
  CountingEnv target;
  EnvWrapper wrapper(&target);
  EXPECT_EQ(wrapper.target(), &target);
  EXPECT_EQ(wrapper.NewWritableFile("f").status(), absl::UnimplementedError("new"));
  EXPECT_EQ(wrapper.ReadFile("f").value_or(""), "read f");
  EXPECT_EQ(wrapper.GetChildren("d").value_or(std::vector<std::string>{}),
            std::vector<std::string>{"d"});
  EXPECT_TRUE(wrapper.IsDirectory("d"));
  EXPECT_EQ(wrapper.CreateDirs("d"), absl::AbortedError("c"));
  EXPECT_EQ(wrapper.RenameFile("a", "b"), absl::AbortedError("r"));
  EXPECT_EQ(wrapper.RemoveAll("d"), absl::AbortedError("x"));
  EXPECT_EQ(wrapper.SyncDir("d"), absl::AbortedError("s"));
  EXPECT_EQ(target.calls, 8);
}

}  // namespace
}  // namespace r2sp
