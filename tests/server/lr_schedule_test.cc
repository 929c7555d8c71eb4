// The learning-rate multiplier: warm-up, milestones, parsing.
#include "server/lr_schedule.h"

#include "gtest/gtest.h"

namespace r2sp {
namespace {

TEST(LrScheduleTest, ConstantByDefault) {
  LrSchedule s;
  EXPECT_EQ(s.Factor(0), 1.0f);
  EXPECT_EQ(s.Factor(1000000), 1.0f);
}

TEST(LrScheduleTest, WarmupThenStepDecay) {
  LrSchedule s;
  s.warmup_updates = 4;
  s.milestones = {10, 20};
  s.gamma = 0.5f;
  EXPECT_FLOAT_EQ(s.Factor(0), 0.25f);
  EXPECT_FLOAT_EQ(s.Factor(1), 0.5f);
  EXPECT_FLOAT_EQ(s.Factor(3), 1.0f);
  EXPECT_FLOAT_EQ(s.Factor(9), 1.0f);
  EXPECT_FLOAT_EQ(s.Factor(10), 0.5f);
  EXPECT_FLOAT_EQ(s.Factor(25), 0.25f);
}

TEST(LrScheduleTest, ScheduledSgdScalesOnlyTheRateByWholeStepsDone) {
  LrSchedule s;
  s.milestones = {2};
  s.gamma = 0.5f;
  const SgdOptions base{0.4f, 0.9f, 0.01f};
  EXPECT_EQ(ScheduledSgd(base, s, 1.5).learning_rate, 0.4f);
  // 1.9999999 steps of b_i / B fractions count as 2 (the slack), so the milestone applies.
  EXPECT_EQ(ScheduledSgd(base, s, 1.9999999).learning_rate, 0.2f);
  const SgdOptions after = ScheduledSgd(base, s, 7.0);
  EXPECT_EQ(after.learning_rate, 0.2f);
  EXPECT_EQ(after.momentum, 0.9f);
  EXPECT_EQ(after.weight_decay, 0.01f);
}

TEST(LrScheduleTest, ParsesMilestones) {
  EXPECT_TRUE(ParseMilestones("")->empty());
  EXPECT_EQ(*ParseMilestones("100,200"), (std::vector<int64_t>{100, 200}));
  EXPECT_FALSE(ParseMilestones("200,100").ok());
  EXPECT_FALSE(ParseMilestones("1,x").ok());
  EXPECT_FALSE(ParseMilestones("0").ok());
}

}  // namespace
}  // namespace r2sp
