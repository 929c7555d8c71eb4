// The model builders: shapes, parameter counts, layout order, deterministic initialisation.
#include "models/graph.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace r2sp::models {
namespace {

TEST(GraphTest, ParameterCounts) {
  EXPECT_EQ(BuildMlp({1, 28, 28}, 10).num_parameters(),
            784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
  // conv1 832 + conv2 51,264 + fc1 3,212,288 + fc2 10,250: about 3.27M, 13 MB of fp32.
  const Graph cnn = BuildCnn({1, 28, 28}, 10);
  EXPECT_EQ(cnn.num_parameters(), 3274634);
  EXPECT_EQ(cnn.nodes.back().out.c, 10);
  const Graph resnet = BuildResNet20({3, 32, 32}, 10);
  // 0.27M trainable parameters (He et al.), plus 2 projection shortcuts (docs/ARCHITECTURE.md).
  EXPECT_GT(resnet.num_parameters(), 270000);
  EXPECT_LT(resnet.num_parameters(), 275000);
  int convs = 0;
  for (const Node& n : resnet.nodes) convs += n.op == Op::kConv && n.kernel == 3;
  EXPECT_EQ(convs, 19);  // 1 + 3 stages x 3 blocks x 2; with the final fc: 20 layers
}

TEST(GraphTest, ShapesFollowTheLayers) {
  const Graph cnn = BuildCnn({1, 28, 28}, 10);
  // conv1 (same) 32x28x28, pool 32x14x14, conv2 64x14x14, pool 64x7x7, flatten 3136, fc1 1024.
  std::vector<Shape> want = {{1, 28, 28},  {32, 28, 28}, {32, 28, 28},  {32, 14, 14},
                             {64, 14, 14}, {64, 14, 14}, {64, 7, 7},    {3136, 1, 1},
                             {1024, 1, 1}, {1024, 1, 1}, {10, 1, 1}};
  ASSERT_EQ(cnn.nodes.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(cnn.nodes[i].out, want[i]) << i;
  EXPECT_EQ(cnn.params[4].name, "fc1.weight");
  EXPECT_EQ(cnn.params[4].dims, (std::vector<int64_t>{1024, 3136}));
  const Graph resnet = BuildResNet20({3, 32, 32}, 10);
  const Node& pooled = resnet.nodes[resnet.nodes.size() - 2];
  EXPECT_EQ(pooled.out, (Shape{64, 1, 1}));
}

// Groups tile the flat array in node order, one per node with parameters, each holding its
// node's parameters (a conv's weight and bias, a batch norm's scale and shift).
TEST(GraphTest, ParamGroupsTileTheParametersByNode) {
  for (const Graph& g : {BuildMlp({1, 28, 28}, 10), BuildCnn({1, 28, 28}, 10),
                         BuildResNet20({3, 32, 32}, 10)}) {
    SCOPED_TRACE(g.name);
    const std::vector<ParamGroup> groups = g.ParamGroups();
    int with_params = 0;
    for (const Node& n : g.nodes) with_params += n.first_param >= 0;
    ASSERT_EQ(groups.size(), static_cast<size_t>(with_params));
    int64_t offset = 0;
    int param = 0;
    for (const ParamGroup& group : groups) {
      const Node& node = g.nodes[group.node];
      EXPECT_EQ(group.first_param, node.first_param);
      EXPECT_EQ(group.first_param, param);
      EXPECT_EQ(group.offset, offset);
      const int expected = node.op == Op::kBatchNorm || node.bias ? 2 : 1;
      EXPECT_EQ(group.end_param - group.first_param, expected) << node.name;
      int64_t count = 0;
      for (int p = group.first_param; p < group.end_param; ++p) count += g.params[p].size();
      EXPECT_EQ(group.count, count);
      offset += group.count;
      param = group.end_param;
    }
    EXPECT_EQ(offset, g.num_parameters());
    EXPECT_EQ(param, static_cast<int>(g.params.size()));
  }
  GraphBuilder empty("relu only", {1, 2, 2}, 4);
  empty.Relu(0, "r");
  EXPECT_TRUE(empty.Finish().ParamGroups().empty());
}

TEST(GraphTest, InitialisationIsDeterministicAndScaled) {
  const Graph g = BuildCnn({1, 28, 28}, 10);
  std::vector<float> a(g.num_parameters()), b(g.num_parameters()), c(g.num_parameters());
  InitParams(g, 42, a.data());
  InitParams(g, 42, b.data());
  InitParams(g, 43, c.data());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // conv2.weight: He normal, std sqrt(2 / (32 * 25)) = 0.05.
  const int64_t start = 832, n = 64 * 32 * 25;
  double sq = 0;
  for (int64_t i = start; i < start + n; ++i) sq += double{a[i]} * a[i];
  EXPECT_NEAR(std::sqrt(sq / n), 0.05, 0.002);
  // fc1.bias: uniform within 1/sqrt(3136).
  const int64_t bias = 832 + 51264 + 3136 * 1024;
  for (int64_t i = bias; i < bias + 1024; ++i) EXPECT_LE(std::abs(a[i]), 1.0 / 56 + 1e-6);
}

TEST(GraphTest, UnknownModelsAndBadShapesAreErrors) {
  EXPECT_FALSE(BuildModel("vgg", {1, 28, 28}, 10).ok());
  EXPECT_FALSE(BuildModel("cnn", {1, 30, 30}, 10).ok());
  EXPECT_FALSE(BuildModel("mlp", {0, 28, 28}, 10).ok());
  EXPECT_TRUE(BuildModel("resnet20", {3, 32, 32}, 10).ok());
}

TEST(GraphTest, DropoutMasksAreReproducibleAndNearTheRate) {
  int kept = 0;
  for (int64_t i = 0; i < 100000; ++i) {
    const bool k = DropoutKeep(1, 5, 3, i, 0.3f);
    EXPECT_EQ(k, DropoutKeep(1, 5, 3, i, 0.3f));
    kept += k;
  }
  EXPECT_NEAR(kept / 100000.0, 0.7, 0.01);
}

}  // namespace
}  // namespace r2sp::models
