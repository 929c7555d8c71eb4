// Tests for EpochPlanBook (scheduler/epoch_plans.h): plans fixed by the first asker, kept for
// the rest, restored from an earlier attempt and pruned where a resumed job starts; saved plans
// that are not this job's are clear errors.
#include "scheduler/epoch_plans.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace r2sp {
namespace {

std::vector<int> Live(const proto::EpochPlan& plan) {
  return std::vector<int>(plan.live_shards().begin(), plan.live_shards().end());
}

TEST(EpochPlanBookTest, TheFirstAskerFixesAPlanAndLaterOnesGetIt) {
  EpochPlanBook book(3);
  bool fixed = false;
  absl::StatusOr<proto::EpochPlan> p = book.Plan(0, true, {2, 0, 1, 1}, &fixed);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(fixed);
  EXPECT_EQ(Live(*p), (std::vector<int>{0, 1, 2}));
  // Worker 1 died: those still in epoch 0 get the plan they started with.
  p = book.Plan(0, false, {0, 2}, &fixed);
  EXPECT_FALSE(fixed);
  EXPECT_EQ(Live(*p), (std::vector<int>{0, 1, 2}));
  p = book.Plan(1, false, {0, 2}, &fixed);
  EXPECT_TRUE(fixed);
  EXPECT_EQ(Live(*p), (std::vector<int>{0, 2}));
  EXPECT_EQ(book.plans().plans_size(), 2);
  EXPECT_EQ(book.plans().data_world(), 3);
}

TEST(EpochPlanBookTest, OnlyTheNextEpochCanBePlanned) {
  EpochPlanBook book(2);
  bool fixed = false;
  EXPECT_EQ(book.Plan(1, false, {0, 1}, &fixed).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(book.Plan(-1, false, {0, 1}, &fixed).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(book.Plan(0, false, {7, -1}, &fixed).status().code(),  // no live shard of the job
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(book.plans().plans_size(), 0);
}

TEST(EpochPlanBookTest, AResumedJobKeepsThePlansUpToWhereItStarts) {
  EpochPlanBook earlier(3);
  bool fixed = false;
  ASSERT_TRUE(earlier.Plan(0, true, {0, 1, 2}, &fixed).ok());
  ASSERT_TRUE(earlier.Plan(1, false, {0, 2}, &fixed).ok());
  ASSERT_TRUE(earlier.Plan(2, false, {0}, &fixed).ok());
  absl::StatusOr<proto::EpochPlans> saved =
      EpochPlanBook::Parse(earlier.plans().SerializeAsString(), 3);
  ASSERT_TRUE(saved.ok()) << saved.status();

  EpochPlanBook book(3);
  book.Restore(*saved);
  // Walking to its step, the resumed worker reads the earlier plans...
  EXPECT_EQ(Live(*book.Plan(0, false, {0, 1, 2}, &fixed)), (std::vector<int>{0, 1, 2}));
  EXPECT_FALSE(fixed);
  // ...starts in epoch 1, whose plan it keeps; epoch 2 is planned again from today's workers.
  EXPECT_EQ(Live(*book.Plan(1, true, {0, 1, 2}, &fixed)), (std::vector<int>{0, 2}));
  EXPECT_TRUE(fixed);
  EXPECT_EQ(book.plans().plans_size(), 2);
  EXPECT_EQ(Live(*book.Plan(2, false, {0, 1, 2}, &fixed)), (std::vector<int>{0, 1, 2}));
  // Plans of this attempt are never dropped.
  EXPECT_EQ(Live(*book.Plan(0, true, {0, 1, 2}, &fixed)), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(book.plans().plans_size(), 3);
}

TEST(EpochPlanBookTest, SavedPlansThatAreNotThisJobsAreClearErrors) {
  EXPECT_FALSE(EpochPlanBook::Parse("\xff\xff\xff", 3).ok());  // not a message
  proto::EpochPlans plans;
  plans.set_data_world(4);
  plans.add_plans()->add_live_shards(0);
  absl::Status s = EpochPlanBook::Parse(plans.SerializeAsString(), 3).status();
  EXPECT_NE(s.message().find("4 data shards, the job has 3"), std::string::npos) << s;
  plans.set_data_world(3);
  EXPECT_TRUE(EpochPlanBook::Parse(plans.SerializeAsString(), 3).ok());
  plans.add_plans();  // an epoch with no live shard
  EXPECT_FALSE(EpochPlanBook::Parse(plans.SerializeAsString(), 3).ok());
  for (const std::vector<int>& bad :
       std::vector<std::vector<int>>{{0, 3}, {-1}, {1, 1}, {2, 0}}) {
    plans.mutable_plans(1)->clear_live_shards();
    for (int s : bad) plans.mutable_plans(1)->add_live_shards(s);
    EXPECT_FALSE(EpochPlanBook::Parse(plans.SerializeAsString(), 3).ok()) << bad.size();
  }
  EXPECT_FALSE(EpochPlanBook::Parse("", 3).ok());  // an empty file: not this job's
  // Truncating a saved file anywhere gives an error or a prefix of the plans, never a crash.
  const std::string bytes = plans.SerializeAsString();
  for (size_t n = 0; n < bytes.size(); ++n) {
    absl::StatusOr<proto::EpochPlans> cut = EpochPlanBook::Parse(bytes.substr(0, n), 3);
    if (cut.ok()) EXPECT_LE(cut->plans_size(), 2);
  }
}

}  // namespace
}  // namespace r2sp
