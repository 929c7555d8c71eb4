// NodeConnectionFromValues: each value in its field's unit, and the role's keys with curve.
#include "common/node_flag_values.h"

#include <cstdlib>
#include <string>

#include "common/auth/curve_keys.h"
#include "gtest/gtest.h"

namespace r2sp {
namespace {

NodeFlagValues Values() {
  NodeFlagValues values;
  values.scheduler = "tcp://10.0.0.1:9000";
  values.bind = "tcp://127.0.0.1:*";
  values.advertise_host = "node7";
  values.heartbeat_ms = 250;
  values.register_wait_s = 7;
  values.io_threads = 3;
  values.connections_per_peer = 2;
  values.scheduler_timeout_s = 2.5;
  values.auth = "none";
  return values;
}

TEST(NodeFlagValuesTest, EachValueReachesItsFieldInItsUnit) {
  const absl::StatusOr<NodeConnectionOptions> o = NodeConnectionFromValues(Values(), proto::WORKER);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->scheduler, "tcp://10.0.0.1:9000");
  EXPECT_EQ(o->bind, "tcp://127.0.0.1:*");
  EXPECT_EQ(o->advertise_host, "node7");
  EXPECT_EQ(o->heartbeat_period, absl::Milliseconds(250));
  EXPECT_EQ(o->register_timeout, absl::Seconds(7));
  EXPECT_EQ(o->scheduler_timeout, absl::Milliseconds(2500));
  EXPECT_EQ(o->io_threads, 3);
  EXPECT_EQ(o->connections_per_peer, 2);
  EXPECT_EQ(o->curve, nullptr);
  EXPECT_TRUE(o->Validate().ok()) << o->Validate();
}

TEST(NodeFlagValuesTest, CurveLoadsTheRolesKeysOrSaysWhy) {
  unsetenv("R2SP_KEYS_DIR");
  const std::string dir = ::testing::TempDir() + "/node_flag_values_keys";
  std::system(("rm -rf '" + dir + "'").c_str());
  ASSERT_TRUE(WriteJobKeys(dir, /*force=*/false).ok());
  NodeFlagValues values = Values();
  values.auth = "curve";
  values.keys_dir = dir;
  const absl::StatusOr<NodeConnectionOptions> o = NodeConnectionFromValues(values, proto::WORKER);
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_NE(o->curve, nullptr);
  EXPECT_EQ(o->curve->role, proto::WORKER);
  EXPECT_EQ(o->curve->secret_key, LoadJobKeys(dir, proto::WORKER)->secret_key);

  values.keys_dir = "";
  EXPECT_EQ(NodeConnectionFromValues(values, proto::WORKER).status().message(),
            "--auth=curve needs --keys_dir (or R2SP_KEYS_DIR): the job's keys, from tools/keygen");
  values.auth = "kerberos";
  EXPECT_EQ(NodeConnectionFromValues(values, proto::WORKER).status().message(),
            "--auth (AuthOptions.auth) must be none or curve, got 'kerberos'");
}

}  // namespace
}  // namespace r2sp
