// The node flags, defined once for the server and worker binaries (common/node_flags.cc), read
// into NodeConnectionOptions: their defaults are NodeConnectionOptions' own, each flag reaches
// its field, --register_timeout_s stands in for --register_wait_s only when given alone, and
// --auth=curve loads the role's keys.
#include "common/node_flags.h"

#include <cstdlib>
#include <string>

#include "common/auth/curve_keys.h"
#include "gflags/gflags.h"
#include "gtest/gtest.h"

namespace r2sp {
namespace {

TEST(NodeFlagsTest, TheDefaultsAreTheConnectionsDefaults) {
  const absl::StatusOr<NodeConnectionOptions> read = ConnectionFromFlags(proto::SERVER);
  ASSERT_TRUE(read.ok()) << read.status();
  const NodeConnectionOptions defaults;
  EXPECT_EQ(read->scheduler, defaults.scheduler);
  EXPECT_EQ(read->bind, defaults.bind);
  EXPECT_EQ(read->advertise_host, defaults.advertise_host);
  EXPECT_EQ(read->register_timeout, defaults.register_timeout);
  EXPECT_EQ(read->heartbeat_period, defaults.heartbeat_period);
  EXPECT_EQ(read->scheduler_timeout, defaults.scheduler_timeout);
  EXPECT_EQ(read->io_threads, defaults.io_threads);
  EXPECT_EQ(read->connections_per_peer, defaults.connections_per_peer);
  EXPECT_EQ(read->curve, nullptr);
}

TEST(NodeFlagsTest, EachFlagReachesItsField) {
  gflags::FlagSaver restore;
  FLAGS_scheduler = "tcp://10.0.0.1:9000";
  FLAGS_bind = "tcp://127.0.0.1:*";
  FLAGS_advertise_host = "node7";
  FLAGS_heartbeat_ms = 250;
  FLAGS_register_wait_s = 7;
  FLAGS_scheduler_timeout_s = 2.5;
  FLAGS_io_threads = 3;
  FLAGS_connections_per_peer = 2;
  const absl::StatusOr<NodeConnectionOptions> read = ConnectionFromFlags(proto::WORKER);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->scheduler, "tcp://10.0.0.1:9000");
  EXPECT_EQ(read->bind, "tcp://127.0.0.1:*");
  EXPECT_EQ(read->advertise_host, "node7");
  EXPECT_EQ(read->heartbeat_period, absl::Milliseconds(250));
  EXPECT_EQ(read->register_timeout, absl::Seconds(7));
  EXPECT_EQ(read->scheduler_timeout, absl::Milliseconds(2500));
  EXPECT_EQ(read->io_threads, 3);
  EXPECT_EQ(read->connections_per_peer, 2);
}

TEST(NodeFlagsTest, TheDeprecatedRegisterTimeoutCountsOnlyAlone) {
  {
    gflags::FlagSaver restore;
    gflags::SetCommandLineOption("register_timeout_s", "5");
    EXPECT_EQ(ConnectionFromFlags(proto::WORKER)->register_timeout, absl::Seconds(5));
  }
  gflags::FlagSaver restore;
  gflags::SetCommandLineOption("register_timeout_s", "5");
  gflags::SetCommandLineOption("register_wait_s", "8");
  EXPECT_EQ(ConnectionFromFlags(proto::WORKER)->register_timeout, absl::Seconds(8));
}

TEST(NodeFlagsTest, CurveLoadsTheRolesKeys) {
  unsetenv("R2SP_KEYS_DIR");
  const std::string dir = ::testing::TempDir() + "/node_flags_keys";
  std::system(("rm -rf '" + dir + "'").c_str());
  ASSERT_TRUE(WriteJobKeys(dir, /*force=*/false).ok());
  gflags::FlagSaver restore;
  FLAGS_auth = "curve";
  FLAGS_keys_dir = dir;
  const absl::StatusOr<NodeConnectionOptions> read = ConnectionFromFlags(proto::SERVER);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_NE(read->curve, nullptr);
  EXPECT_EQ(read->curve->role, proto::SERVER);
  EXPECT_EQ(read->curve->public_key, LoadJobKeys(dir, proto::SERVER)->public_key);
  FLAGS_keys_dir = "";
  EXPECT_EQ(ConnectionFromFlags(proto::SERVER).status().message(),
            "--auth=curve needs --keys_dir (or R2SP_KEYS_DIR): the job's keys, from tools/keygen");
}

}  // namespace
}  // namespace r2sp
