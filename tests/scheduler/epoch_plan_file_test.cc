// scheduler/epoch_plan_file: saved plans read back as they were; no file is no plans; another
// job's plans or junk are a clear error naming the file; a save whose fsync fails, that is
// torn, that fills the disk or whose rename fails is a clear error and leaves the plans saved
// before, which is what a restarted scheduler reads.
#include "scheduler/epoch_plan_file.h"

#include <string>
#include <vector>

#include "common/durable_file.h"
#include "gtest/gtest.h"
#include "scheduler/epoch_plans.h"
#include "tests/testing/fault_injection_env.h"
#include "tests/testing/status_assert.h"

namespace r2sp {
namespace {

using testing::FaultInjectionEnv;
using testing::FileFault;

class EpochPlanFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/plans_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_OK(env_.RemoveAll(dir_));
    ASSERT_OK(env_.CreateDirs(dir_));
    path_ = dir_ + "/plans";
  }

  // The plans of `epochs` epochs of a 3-worker job, worker 1 gone after the first.
  static proto::EpochPlans Plans(int epochs) {
    EpochPlanBook book(3);
    bool fixed = false;
    for (int e = 0; e < epochs; ++e) {
      EXPECT_TRUE(
          book.Plan(e, e == 0, e == 0 ? std::vector<int>{0, 1, 2} : std::vector<int>{0, 2}, &fixed)
              .ok());
    }
    return book.plans();
  }

  FaultInjectionEnv env_;
  std::string dir_;
  std::string path_;
};

TEST_F(EpochPlanFileTest, SavedPlansReadBackAndNoFileIsNoPlans) {
  absl::StatusOr<proto::EpochPlans> none = LoadEpochPlanFile(path_, 3, &env_);
  ASSERT_OK(none.status());
  EXPECT_EQ(none->plans_size(), 0);
  ASSERT_OK(SaveEpochPlanFile(path_, Plans(2), &env_));
  absl::StatusOr<proto::EpochPlans> loaded = LoadEpochPlanFile(path_, 3, &env_);
  ASSERT_OK(loaded.status());
  EXPECT_EQ(loaded->SerializeAsString(), Plans(2).SerializeAsString());
  EXPECT_EQ(env_.GetChildren(dir_).value_or(std::vector<std::string>{}),
            std::vector<std::string>{"plans"});
}

TEST_F(EpochPlanFileTest, AnotherJobsPlansOrJunkAreRefusedNamingTheFile) {
  ASSERT_OK(SaveEpochPlanFile(path_, Plans(1), &env_));
  EXPECT_EQ(LoadEpochPlanFile(path_, 4, &env_).status(),
            absl::InvalidArgumentError(path_ + ": plans for 3 data shards, the job has 4"));
  ASSERT_OK(WriteAndSync(&env_, path_, "junk"));
  EXPECT_EQ(LoadEpochPlanFile(path_, 3, &env_).status(),
            absl::InvalidArgumentError(path_ + ": not a serialized EpochPlans message"));
  EXPECT_EQ(LoadEpochPlanFile(dir_, 3, &env_).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(EpochPlanFileTest, AFailedSaveLeavesThePlansSavedBefore) {
  ASSERT_OK(SaveEpochPlanFile(path_, Plans(1), &env_));
  const std::string tmp = path_ + ".tmp";
  const struct {
    FileFault fault;
    absl::Status error;
  } cases[] = {
      {FileFault::kFailedSync,
       absl::UnavailableError("cannot fsync " + tmp + ": Input/output error")},
      {FileFault::kTornWrite,
       absl::UnavailableError("cannot write " + tmp + ": Input/output error")},
      {FileFault::kNoSpace,
       absl::ResourceExhaustedError("cannot write " + tmp + ": No space left on device")},
      {FileFault::kFailedRename,
       absl::UnavailableError("cannot rename " + tmp + " to " + path_ + ": Input/output error")},
  };
  for (const auto& c : cases) {
    env_.Inject(c.fault, dir_);
    EXPECT_EQ(SaveEpochPlanFile(path_, Plans(3), &env_), c.error);
    absl::StatusOr<proto::EpochPlans> loaded = LoadEpochPlanFile(path_, 3, Env::Default());
    ASSERT_OK(loaded.status());
    EXPECT_EQ(loaded->plans_size(), 1) << c.error;
    EXPECT_EQ(env_.GetChildren(dir_).value_or(std::vector<std::string>{}),
              std::vector<std::string>{"plans"});
  }
  EXPECT_EQ(env_.fired(), 4);
}

}  // namespace
}  // namespace r2sp
