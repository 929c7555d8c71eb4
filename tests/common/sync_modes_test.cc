// Which modes share round-synchronous servers (bsp, easgd) and which are elastic (easgd,
// eawild); and --sync's names for every mode, with the exact error for an unknown one.
#include "common/sync_modes.h"

#include "gtest/gtest.h"

namespace r2sp {
namespace {

TEST(SyncModesTest, RoundSynchronousAndElasticModes) {
  for (proto::SyncMode m : {proto::ASP, proto::SSP, proto::R2SP, proto::EAWILD}) {
    EXPECT_FALSE(RoundSynchronous(m)) << m;
  }
  EXPECT_TRUE(RoundSynchronous(proto::BSP));
  EXPECT_TRUE(RoundSynchronous(proto::EASGD));
  for (proto::SyncMode m : {proto::ASP, proto::SSP, proto::R2SP, proto::BSP}) {
    EXPECT_FALSE(Elastic(m)) << m;
  }
  EXPECT_TRUE(Elastic(proto::EASGD));
  EXPECT_TRUE(Elastic(proto::EAWILD));
}

TEST(SyncModesTest, EveryModeHasItsFlagName) {
  for (proto::SyncMode m :
       {proto::ASP, proto::BSP, proto::SSP, proto::R2SP, proto::EASGD, proto::EAWILD}) {
    EXPECT_EQ(*ParseSyncMode(SyncModeName(m)), m) << SyncModeName(m);
  }
  EXPECT_EQ(SyncModeName(proto::EAWILD), "eawild");
  EXPECT_EQ(*ParseSyncMode("EASGD"), proto::EASGD);
  const absl::StatusOr<proto::SyncMode> bad = ParseSyncMode("hogwild");
  EXPECT_EQ(bad.status().message(),
            "--sync must be one of bsp, ssp, asp, r2sp, easgd, eawild; got 'hogwild'");
}

}  // namespace
}  // namespace r2sp
