// The job's key files: keygen's layout and modes, loading one role's keys, and the refusals
// (a secret key others may read, a missing or malformed file, a pair that does not match).
#include "common/auth/curve_keys.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace r2sp {
namespace {

std::string FreshDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/" + name;
  std::system(("rm -rf '" + dir + "'").c_str());
  return dir;
}

mode_t ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST(CurveKeysTest, KeygenWritesOnePairPerRoleWithPrivateModes) {
  const std::string dir = FreshDir("keys");
  ASSERT_TRUE(WriteJobKeys(dir, /*force=*/false).ok());
  EXPECT_EQ(ModeOf(dir), 0700u);
  for (const char* role : {"scheduler", "server", "worker"}) {
    EXPECT_EQ(ModeOf(dir + "/" + role + ".key"), 0600u) << role;
    EXPECT_EQ(ModeOf(dir + "/" + role + ".pub"), 0644u) << role;
  }
  absl::StatusOr<JobKeys> worker = LoadJobKeys(dir, proto::WORKER);
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_EQ(worker->public_keys.size(), 3u);
  EXPECT_EQ(worker->public_key, worker->public_keys.at(proto::WORKER));
  absl::StatusOr<JobKeys> server = LoadJobKeys(dir, proto::SERVER);
  ASSERT_TRUE(server.ok());
  EXPECT_NE(server->secret_key, worker->secret_key);
  // Existing keys are kept unless forced.
  const absl::Status again = WriteJobKeys(dir, /*force=*/false);
  EXPECT_TRUE(absl::IsAlreadyExists(again)) << again;
  ASSERT_TRUE(WriteJobKeys(dir, /*force=*/true).ok());
  EXPECT_NE(LoadJobKeys(dir, proto::WORKER)->secret_key, worker->secret_key);
}

TEST(CurveKeysTest, RefusesASecretKeyOthersMayRead) {
  const std::string dir = FreshDir("keys-0644");
  ASSERT_TRUE(WriteJobKeys(dir, false).ok());
  ASSERT_EQ(chmod((dir + "/worker.key").c_str(), 0644), 0);
  const absl::StatusOr<JobKeys> keys = LoadJobKeys(dir, proto::WORKER);
  ASSERT_TRUE(absl::IsPermissionDenied(keys.status())) << keys.status();
  EXPECT_NE(keys.status().message().find("worker.key has mode 0644"), std::string::npos)
      << keys.status();
  EXPECT_TRUE(LoadJobKeys(dir, proto::SERVER).ok());  // only the role's own secret is read
}

TEST(CurveKeysTest, RefusesMissingMalformedAndMismatchedKeys) {
  const std::string dir = FreshDir("keys-bad");
  EXPECT_TRUE(absl::IsNotFound(LoadJobKeys(dir, proto::WORKER).status()));
  ASSERT_TRUE(WriteJobKeys(dir, false).ok());
  std::ofstream(dir + "/server.pub") << "not a key\n";
  absl::StatusOr<JobKeys> keys = LoadJobKeys(dir, proto::WORKER);
  EXPECT_TRUE(absl::IsInvalidArgument(keys.status())) << keys.status();
  EXPECT_NE(keys.status().message().find("server.pub"), std::string::npos);
  ASSERT_TRUE(WriteJobKeys(dir, true).ok());
  std::string other;
  std::ifstream(dir + "/scheduler.pub") >> other;
  std::ofstream(dir + "/worker.pub") << other << "\n";
  keys = LoadJobKeys(dir, proto::WORKER);
  EXPECT_NE(keys.status().message().find("not one key pair"), std::string::npos)
      << keys.status();
  EXPECT_FALSE(LoadJobKeys(dir, proto::ROLE_UNSPECIFIED).ok());
}

TEST(CurveKeysTest, RoleNamesRoundTrip) {
  for (proto::Role r : {proto::SCHEDULER, proto::SERVER, proto::WORKER}) {
    EXPECT_EQ(RoleFromKeyName(KeyRoleName(r)), r);
  }
  EXPECT_EQ(RoleFromKeyName(""), proto::ROLE_UNSPECIFIED);
  EXPECT_EQ(RoleFromKeyName("admin"), proto::ROLE_UNSPECIFIED);
}

}  // namespace
}  // namespace r2sp
