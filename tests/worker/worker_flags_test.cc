// SetWorkerFlags (the Python client's way to the worker's flags) and WorkerOptionsFromFlags.
#include "worker/worker_flags.h"

#include "absl/status/status.h"
#include "gflags/gflags.h"
#include "gtest/gtest.h"

namespace r2sp {
namespace {

TEST(WorkerFlagsTest, ValuesAndBooleansReachTheOptions) {
  gflags::FlagSaver restore;
  ASSERT_TRUE(SetWorkerFlags({"--batch_size=7", "--overlap", "--nolookahead",
                              "--push_codec=fp16", "--scheduler=tcp://10.0.0.1:9000"})
                  .ok());
  const absl::StatusOr<WorkerOptions> o = WorkerOptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->batch_size, 7);
  EXPECT_TRUE(o->exchange.overlap);
  EXPECT_FALSE(o->exchange.lookahead);
  EXPECT_EQ(o->ps.push_codec.codec, proto::FP16);
  EXPECT_EQ(o->connection.scheduler, "tcp://10.0.0.1:9000");
}

TEST(WorkerFlagsTest, TheSaverRestoresTheDefaults) {
  {
    gflags::FlagSaver restore;
    ASSERT_TRUE(SetWorkerFlags({"--batch_size=9"}).ok());
  }
  EXPECT_EQ(WorkerOptionsFromFlags()->batch_size, 64);
}

TEST(WorkerFlagsTest, BadFlagsSayWhatIsWrong) {
  gflags::FlagSaver restore;
  EXPECT_EQ(SetWorkerFlags({"--bogus=1"}),
            absl::InvalidArgumentError("unknown worker flag --bogus"));
  EXPECT_EQ(SetWorkerFlags({"--batch_size=x"}),
            absl::InvalidArgumentError("bad value for worker flag --batch_size: 'x' (int32 "
                                       "expected)"));
  EXPECT_EQ(SetWorkerFlags({"--batch_size"}),
            absl::InvalidArgumentError("worker flag --batch_size needs a value "
                                       "(--batch_size=VALUE)"));
  EXPECT_EQ(SetWorkerFlags({"batch_size=3"}),
            absl::InvalidArgumentError("worker flags look like --name=value, got 'batch_size=3'"));
  EXPECT_EQ(SetWorkerFlags({"--nobatch_size"}),
            absl::InvalidArgumentError("unknown worker flag --nobatch_size"));
}

TEST(WorkerFlagsTest, ValuesTheOptionsRefuseFailThere) {
  gflags::FlagSaver restore;
  ASSERT_TRUE(SetWorkerFlags({"--batch_size=0"}).ok());
  const absl::Status refused = WorkerOptionsFromFlags().status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("--batch_size"), absl::string_view::npos) << refused;
}

}  // namespace
}  // namespace r2sp
