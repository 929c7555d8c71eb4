// NodeConnectionOptions::Validate: one case per check, each with its exact message; and
// ConnectNode returning it before binding anything.
#include <functional>
#include <string>
#include <vector>

#include "common/node_connection.h"
#include "gtest/gtest.h"

namespace r2sp {
namespace {

struct Case {
  std::string name;
  std::function<void(NodeConnectionOptions&)> change;
  std::string message;
};

TEST(NodeConnectionOptionsTest, DefaultsAreValid) {
  EXPECT_TRUE(NodeConnectionOptions().Validate().ok()) << NodeConnectionOptions().Validate();
}

TEST(NodeConnectionOptionsTest, EachCheckNamesItsFlagAndField) {
  const std::vector<Case> cases = {
      {"scheduler", [](NodeConnectionOptions& o) { o.scheduler.clear(); },
       "--scheduler (NodeConnectionOptions.scheduler) must be non-empty, got ''"},
      {"heartbeat", [](NodeConnectionOptions& o) { o.heartbeat_period = absl::Milliseconds(9); },
       "--heartbeat_ms (NodeConnectionOptions.heartbeat_period) must be >= 10ms, got 9ms"},
      {"register", [](NodeConnectionOptions& o) { o.register_timeout = absl::ZeroDuration(); },
       "--register_wait_s (NodeConnectionOptions.register_timeout) must be >= 1s, got 0"},
      {"scheduler_timeout",
       [](NodeConnectionOptions& o) { o.scheduler_timeout = absl::Seconds(1); },
       "--scheduler_timeout_s (NodeConnectionOptions.scheduler_timeout) must be longer than one "
       "heartbeat period (1s), got 1s"},
      {"io_threads", [](NodeConnectionOptions& o) { o.io_threads = -1; },
       "--io_threads (NodeConnectionOptions.io_threads) must be >= 0, got -1"},
      {"connections", [](NodeConnectionOptions& o) { o.connections_per_peer = 100; },
       "--connections_per_peer (NodeConnectionOptions.connections_per_peer) must be in [0, 99], "
       "got 100"},
  };
  for (const Case& c : cases) {
    NodeConnectionOptions options;
    c.change(options);
    const absl::Status status = options.Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_EQ(status.message(), c.message) << c.name;
  }
}

TEST(NodeConnectionOptionsTest, ConnectNodeReturnsTheValidateError) {
  NodeConnectionOptions options;
  options.io_threads = -3;
  const absl::StatusOr<NodeConnection> node = ConnectNode(options);
  EXPECT_EQ(node.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(node.status().message(),
            "--io_threads (NodeConnectionOptions.io_threads) must be >= 0, got -3");
}

}  // namespace
}  // namespace r2sp
