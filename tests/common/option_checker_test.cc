// OptionChecker: the first failure wins, its message names flag and field, and values are
// written as the messages promise.
#include "common/option_checker.h"

#include "gtest/gtest.h"

namespace r2sp {
namespace {

TEST(OptionCheckerTest, NoFailureIsOk) {
  OptionChecker c("FooOptions");
  c.Check(true, "--a", "a", ">= 1", 3);
  c.Require(true, "--b", "b", "needs --c");
  c.Merge(absl::OkStatus());
  EXPECT_TRUE(c.status().ok());
}

TEST(OptionCheckerTest, TheFirstFailureWins) {
  OptionChecker c("FooOptions");
  c.Check(true, "--a", "a", ">= 1", 3);
  c.Check(false, "--b", "nested.b", ">= 2", int64_t{-7});
  c.Check(false, "--c", "c", ">= 3", 0);
  c.Merge(absl::InternalError("nested"));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(), "--b (FooOptions.nested.b) must be >= 2, got -7");
}

TEST(OptionCheckerTest, RequireSaysTheRest) {
  OptionChecker c("FooOptions");
  c.Require(false, "--resume", "resume", "needs --dir");
  EXPECT_EQ(c.status().message(), "--resume (FooOptions.resume) needs --dir");
}

TEST(OptionCheckerTest, MergeKeepsTheNestedError) {
  OptionChecker c("FooOptions");
  c.Merge(absl::InvalidArgumentError("--x (BarOptions.x) must be > 0, got 0"));
  c.Check(false, "--c", "c", ">= 3", 0);
  EXPECT_EQ(c.status().message(), "--x (BarOptions.x) must be > 0, got 0");
}

TEST(OptionValueTextTest, EachKind) {
  EXPECT_EQ(OptionValueText(std::string("cpu")), "'cpu'");
  EXPECT_EQ(OptionValueText("tpu"), "'tpu'");
  EXPECT_EQ(OptionValueText(true), "true");
  EXPECT_EQ(OptionValueText(absl::Milliseconds(1500)), "1.5s");
  EXPECT_EQ(OptionValueText(0.25), "0.25");
  EXPECT_EQ(OptionValueText(uint64_t{1} << 40), "1099511627776");
}

}  // namespace
}  // namespace r2sp
