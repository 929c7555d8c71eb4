// BuildPlan and ArgsFor (models/cuda/cuda_plan.h): each node's buffers and descriptors, and
// which backward write initialises an input's gradient. Reports itself skipped when no GPU is
// visible (CI compiles it; the GPU machine runs it).
#include "models/cuda/cuda_plan.h"

#include <vector>

#include "gtest/gtest.h"
#include "models/graph.h"
#include "tests/models/cuda_harness.h"

namespace r2sp::models::cuda_internal {
namespace {

using testing::CudaHarness;
using testing::HaveGpu;

class CudaPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device visible";
  }
};

TEST_F(CudaPlanTest, FirstWriterInBackwardOrderInitialisesTheGradient) {
  // fc -> relu -> add(relu, fc): the add writes fc's gradient first, the relu accumulates.
  GraphBuilder b("residual", Shape{2, 1, 1}, 2);
  const int fc = b.Linear(0, "fc", 2);
  b.Add(b.Relu(fc, "relu"), fc, "add");
  CudaHarness h(b.Finish());
  ASSERT_TRUE(h.Init(std::vector<float>(6, 0.0f), 3).ok());
  const PlanGpu& plan = h.plan();
  EXPECT_TRUE(plan.nodes[3].first_diff_write[0]);   // add -> relu
  EXPECT_TRUE(plan.nodes[3].first_diff_write[1]);   // add -> fc
  EXPECT_FALSE(plan.nodes[2].first_diff_write[0]);  // relu -> fc
  EXPECT_TRUE(plan.nodes[1].first_diff_write[0]);   // fc -> the images
}

TEST_F(CudaPlanTest, BuffersAndDescriptorsPerOp) {
  GraphBuilder b("ops", Shape{1, 4, 4}, 2);
  int x = b.Conv(0, "conv", 3, 3, 1, 1, /*bias=*/true);
  x = b.BatchNorm(x, "bn");
  x = b.MaxPool(x, "pool", 2, 2);
  x = b.Dropout(x, "drop", 0.5f);
  b.Linear(x, "fc", 2);
  const Graph g = b.Finish();
  CudaHarness h(g);
  std::vector<float> params(g.num_parameters(), 0.0f);
  ASSERT_TRUE(h.Init(params, 2).ok());
  const PlanGpu& plan = h.plan();
  EXPECT_EQ(plan.batch, 2);
  EXPECT_EQ(plan.images.count, 2u * 16);
  EXPECT_EQ(plan.labels.count, 2u);
  EXPECT_EQ(plan.nodes[0].out.ptr, nullptr);  // the images are the input's output
  EXPECT_EQ(plan.nodes[1].out.count, 2u * 3 * 16);
  EXPECT_EQ(plan.nodes[1].diff.count, 2u * 3 * 16);
  EXPECT_NE(plan.nodes[1].filter, nullptr);
  EXPECT_NE(plan.nodes[1].conv, nullptr);
  EXPECT_NE(plan.nodes[1].bias_desc, nullptr);
  EXPECT_EQ(plan.nodes[2].saved_mean.count, 3u);
  EXPECT_EQ(plan.nodes[2].saved_inv_var.count, 3u);
  EXPECT_NE(plan.nodes[3].pool, nullptr);
  EXPECT_EQ(plan.nodes[4].mask.count, 2u * 3 * 4);
  EXPECT_NE(plan.nodes[5].bias_desc, nullptr);
  EXPECT_EQ(plan.nodes[5].out.count, 2u * 2);
}

TEST_F(CudaPlanTest, ArgsForReadsTheImagesOrTheInputsOutput) {
  GraphBuilder b("fc", Shape{2, 1, 1}, 2);
  b.Relu(b.Linear(0, "fc", 2), "relu");
  CudaHarness h(b.Finish());
  ASSERT_TRUE(h.Init(std::vector<float>(6, 0.0f), 1).ok());
  const NodeArgs fc = ArgsFor(h.graph(), h.plan(), 1);
  EXPECT_EQ(fc.x, h.plan().images.ptr);
  EXPECT_FALSE(fc.need_dx());
  const NodeArgs relu = ArgsFor(h.graph(), h.plan(), 2);
  EXPECT_EQ(relu.in_index, 1);
  EXPECT_EQ(relu.x, h.plan().nodes[1].out.ptr);
  EXPECT_TRUE(relu.need_dx());
}

}  // namespace
}  // namespace r2sp::models::cuda_internal
