// WorkerOptionsFromFlags: the worker binary's flags (//worker:main_flags, linked here) read into
// WorkerOptions, each into the part it configures, and the errors of flags it cannot read or
// the options refuse.
#include "worker/worker_flags.h"

#include <map>
#include <string>

#include "absl/status/status.h"
#include "gflags/gflags.h"
#include "gtest/gtest.h"

namespace r2sp {
namespace {

// Sets worker flags as the command line would (under a gflags::FlagSaver of the caller's).
void SetFlags(const std::map<std::string, std::string>& flags) {
  for (const auto& [name, value] : flags) {
    ASSERT_FALSE(gflags::SetCommandLineOption(name.c_str(), value.c_str()).empty())
        << "--" << name << "=" << value;
  }
}

TEST(WorkerFlagsTest, ValuesReachTheOptions) {
  gflags::FlagSaver restore;
  SetFlags({{"batch_size", "7"},
            {"overlap", "true"},
            {"lookahead", "false"},
            {"push_codec", "fp16"},
            {"scheduler", "tcp://10.0.0.1:9000"},
            {"model", "mlp"},
            {"init", "checkpoint:/models/m.r2sp"},
            {"grad", "known"},
            {"device", "cpu"},
            {"keep_models", "5"},
            {"augment", "false"}});
  const absl::StatusOr<WorkerOptions> o = WorkerOptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->batch_size, 7);
  EXPECT_TRUE(o->exchange.overlap);
  EXPECT_FALSE(o->exchange.lookahead);
  EXPECT_EQ(o->ps.push_codec.codec, proto::FP16);
  EXPECT_EQ(o->connection.scheduler, "tcp://10.0.0.1:9000");
  EXPECT_EQ(o->model, "mlp");
  EXPECT_EQ(o->init_model_path, "/models/m.r2sp");
  EXPECT_FALSE(o->random_init);
  EXPECT_TRUE(o->synthetic.known_gradients);
  EXPECT_EQ(o->workload.keep_models, 5);
  EXPECT_FALSE(o->batcher.augment);
}

TEST(WorkerFlagsTest, TheSaverRestoresTheDefaults) {
  {
    gflags::FlagSaver restore;
    SetFlags({{"batch_size", "9"}});
    EXPECT_EQ(WorkerOptionsFromFlags()->batch_size, 9);
  }
  EXPECT_EQ(WorkerOptionsFromFlags()->batch_size, 64);
}

TEST(WorkerFlagsTest, FlagsItCannotReadSayWhy) {
  gflags::FlagSaver restore;
  SetFlags({{"init", "latest"}});
  EXPECT_EQ(
      WorkerOptionsFromFlags().status(),
      absl::InvalidArgumentError("--init must be random, zero or checkpoint:PATH, got 'latest'"));
  SetFlags({{"init", "random"}, {"grad", "exact"}});
  EXPECT_EQ(WorkerOptionsFromFlags().status(),
            absl::InvalidArgumentError("--grad must be random or known, got 'exact'"));
  SetFlags({{"grad", "random"}, {"pull_codec", "topk:0.1"}});
  EXPECT_EQ(
      WorkerOptionsFromFlags().status(),
      absl::InvalidArgumentError("--pull_codec must be fp32, fp16 or fp16_delta; got 'topk:0.1'"));
}

TEST(WorkerFlagsTest, ValuesTheOptionsRefuseFailThere) {
  gflags::FlagSaver restore;
  SetFlags({{"batch_size", "0"}});
  EXPECT_EQ(WorkerOptionsFromFlags().status(),
            absl::InvalidArgumentError(
                "--batch_size (WorkerOptions.batch_size) must be in [1, 65536], got 0"));
  SetFlags({{"batch_size", "64"}, {"layers", "0"}});
  EXPECT_EQ(WorkerOptionsFromFlags().status(),
            absl::InvalidArgumentError("--layers (WorkerOptions.layers) must be in [1, 10000], "
                                       "got 0"));
}

}  // namespace
}  // namespace r2sp
