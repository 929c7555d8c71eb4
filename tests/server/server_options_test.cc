// ServerOptions::Validate and ServerNodeOptions::Validate: one case per check, each with its
// exact message; and ServerNode::Run returning the error before it binds anything.
#include "server/server_options.h"

#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/server_node.h"

namespace r2sp {
namespace {

template <typename Options>
struct Case {
  std::string name;
  std::function<void(Options&)> change;
  std::string message;
};

TEST(ServerOptionsTest, DefaultsAreValid) {
  EXPECT_TRUE(ServerOptions().Validate().ok()) << ServerOptions().Validate();
  EXPECT_TRUE(ServerNodeOptions().Validate().ok()) << ServerNodeOptions().Validate();
}

TEST(ServerOptionsTest, EachCheckNamesItsFlagAndField) {
  const std::vector<Case<ServerOptions>> cases = {
      {"lr", [](ServerOptions& o) { o.sgd.learning_rate = 0; },
       "--lr (ServerOptions.sgd.learning_rate) must be > 0, got 0"},
      {"momentum", [](ServerOptions& o) { o.sgd.momentum = 1.5f; },
       "--momentum (ServerOptions.sgd.momentum) must be in [0, 1), got 1.5"},
      {"momentum_one", [](ServerOptions& o) { o.sgd.momentum = 1; },
       "--momentum (ServerOptions.sgd.momentum) must be in [0, 1), got 1"},
      {"weight_decay", [](ServerOptions& o) { o.sgd.weight_decay = -0.5f; },
       "--weight_decay (ServerOptions.sgd.weight_decay) must be >= 0, got -0.5"},
      {"warmup", [](ServerOptions& o) { o.schedule.warmup_updates = -1; },
       "--warmup_updates (ServerOptions.schedule.warmup_updates) must be >= 0, got -1"},
      {"gamma_zero", [](ServerOptions& o) { o.schedule.gamma = 0; },
       "--lr_gamma (ServerOptions.schedule.gamma) must be in (0, 1], got 0"},
      {"gamma_big", [](ServerOptions& o) { o.schedule.gamma = 2; },
       "--lr_gamma (ServerOptions.schedule.gamma) must be in (0, 1], got 2"},
      {"milestones", [](ServerOptions& o) { o.schedule.milestones = {300, 200}; },
       "--lr_milestones (ServerOptions.schedule.milestones) must be positive and ascending, "
       "got '300,200'"},
      {"milestones_zero", [](ServerOptions& o) { o.schedule.milestones = {0}; },
       "--lr_milestones (ServerOptions.schedule.milestones) must be positive and ascending, "
       "got '0'"},
      {"apply_threads", [](ServerOptions& o) { o.apply_threads = -1; },
       "--apply_threads (ServerOptions.apply_threads) must be auto (0) or in [1, 64], got -1"},
      {"apply_threads_big", [](ServerOptions& o) { o.apply_threads = 65; },
       "--apply_threads (ServerOptions.apply_threads) must be auto (0) or in [1, 64], got 65"},
  };
  for (const auto& c : cases) {
    ServerOptions options;
    c.change(options);
    const absl::Status status = options.Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_EQ(status.message(), c.message) << c.name;
  }
}

TEST(ServerNodeOptionsTest, EachCheckNamesItsFlagAndField) {
  const std::vector<Case<ServerNodeOptions>> cases = {
      {"connection", [](ServerNodeOptions& o) { o.connection.scheduler = ""; },
       "--scheduler (NodeConnectionOptions.scheduler) must be non-empty, got ''"},
      {"server", [](ServerNodeOptions& o) { o.server.apply_threads = 65; },
       "--apply_threads (ServerOptions.apply_threads) must be auto (0) or in [1, 64], got 65"},
      {"keep", [](ServerNodeOptions& o) { o.checkpoint.keep = 0; },
       "--checkpoint_keep (ServerNodeOptions.checkpoint.keep) must be >= 1, got 0"},
      {"every_time", [](ServerNodeOptions& o) { o.checkpoint.every_time = absl::Seconds(-1); },
       "--checkpoint_every (ServerNodeOptions.checkpoint.every_time) must be >= 0, got -1s"},
      {"every_steps", [](ServerNodeOptions& o) { o.checkpoint.every_steps = -3; },
       "--checkpoint_every (ServerNodeOptions.checkpoint.every_steps) must be >= 0, got -3"},
      {"resume", [](ServerNodeOptions& o) { o.resume = true; },
       "--resume (ServerNodeOptions.resume) needs --checkpoint_dir"},
  };
  for (const auto& c : cases) {
    ServerNodeOptions options;
    c.change(options);
    const absl::Status status = options.Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_EQ(status.message(), c.message) << c.name;
  }
}

TEST(ServerNodeOptionsTest, RunReturnsTheValidateErrorBeforeBinding) {
  ServerNodeOptions options;
  options.server.sgd.learning_rate = -1;
  options.connection.bind = "tcp://no-such-interface-r2sp:*";  // never reached
  ServerNode node(options);
  const absl::Status status = node.Run();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "--lr (ServerOptions.sgd.learning_rate) must be > 0, got -1");
}

TEST(ServerNodeOptionsTest, StopBeforeServingLeavesTheExitToTheCaller) {
  ServerNode node{ServerNodeOptions()};
  EXPECT_FALSE(node.Stop("stopped by signal 15", 143));
  EXPECT_EQ(node.exit_status(), 143);
  EXPECT_FALSE(node.Stop("a second stop", 3));  // the first call counts
  EXPECT_EQ(node.exit_status(), 143);
}

}  // namespace
}  // namespace r2sp
