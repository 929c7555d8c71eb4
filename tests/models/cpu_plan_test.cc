// PlanSteps (models/cpu/cpu_plan.h): parameter offsets, parameter bindings, and the reorder
// steps Converted appends only when a layout differs.
#include "models/cpu/cpu_plan.h"

#include <vector>

#include "gtest/gtest.h"
#include "models/graph.h"

namespace r2sp::models::cpu_internal {
namespace {

// Input 2x1x1, fc1 (3x2 weights, 3 biases), fc2 (4x3 weights, 4 biases).
Graph TwoLinear() {
  GraphBuilder b("two_linear", Shape{2, 1, 1}, 4);
  const int x = b.Linear(0, "fc1", 3);
  b.Linear(x, "fc2", 4);
  return b.Finish();
}

TEST(PlanStepsTest, ParameterOffsetsFollowTheFlatArray) {
  PlanSteps steps(TwoLinear());
  EXPECT_EQ(steps.param_offset(0), 0);
  EXPECT_EQ(steps.param_offset(1), 6);
  EXPECT_EQ(steps.param_offset(2), 9);
  EXPECT_EQ(steps.param_offset(3), 21);
}

TEST(PlanStepsTest, ParamMemoryBindsParametersOrGradientsAtTheOffset) {
  PlanSteps steps(TwoLinear());
  Plan plan;
  const memory w = steps.ParamMemory(plan, 2, {4, 3}, Tag::oi, /*grad=*/false);
  const memory db = steps.ParamMemory(plan, 3, {4}, Tag::x, /*grad=*/true);
  ASSERT_EQ(plan.param_bindings.size(), 1u);
  ASSERT_EQ(plan.grad_bindings.size(), 1u);
  EXPECT_EQ(plan.param_bindings[0].first, w);
  EXPECT_EQ(plan.param_bindings[0].second, 9);
  EXPECT_EQ(plan.grad_bindings[0].first, db);
  EXPECT_EQ(plan.grad_bindings[0].second, 21);
  EXPECT_EQ(w.get_desc(), Desc({4, 3}, Tag::oi));
  EXPECT_EQ(w.get_data_handle(), nullptr);  // bound each step
  EXPECT_TRUE(plan.forward.empty());
}

TEST(PlanStepsTest, ConvertedKeepsAMemoryAlreadyInTheWantedLayout) {
  PlanSteps steps(TwoLinear());
  Steps list;
  const memory m(Desc({1, 2, 1, 2}, Tag::nchw), steps.engine());
  const memory same = steps.Converted(list, m, Desc({1, 2, 1, 2}, Tag::nchw));
  EXPECT_EQ(same, m);
  EXPECT_TRUE(list.empty());
}

TEST(PlanStepsTest, ConvertedAppendsAReorderThatRunsOnTheStream) {
  PlanSteps steps(TwoLinear());
  Steps list;
  std::vector<float> nchw = {1, 2, 3, 4};  // channel 0: 1 2, channel 1: 3 4
  const memory m(Desc({1, 2, 1, 2}, Tag::nchw), steps.engine(), nchw.data());
  const memory nhwc = steps.Converted(list, m, Desc({1, 2, 1, 2}, Tag::nhwc));
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(nhwc.get_desc(), Desc({1, 2, 1, 2}, Tag::nhwc));
  list[0]();
  steps.stream().wait();
  const float* out = static_cast<const float*>(nhwc.get_data_handle());
  EXPECT_EQ(std::vector<float>(out, out + 4), (std::vector<float>{1, 3, 2, 4}));
}

}  // namespace
}  // namespace r2sp::models::cpu_internal
