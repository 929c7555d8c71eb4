// ForwardPrimitives (models/cpu/cpu_forward.h) on hand-sized graphs whose outputs are known
// exactly: a fully connected layer and ReLU, batch norm's running statistics, dropout's masks,
// and inference dropout as a free identity.
#include "models/cpu/cpu_forward.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "models/cpu/cpu_plan.h"
#include "models/graph.h"

namespace r2sp::models::cpu_internal {
namespace {

// The forward half of CpuNetwork: a plan of every node, bound to `params` and `images`.
class ForwardHarness {
 public:
  ForwardHarness(Graph graph, uint64_t seed)
      : graph_(std::move(graph)),
        steps_(graph_),
        forward_(graph_, steps_, &running_, seed, &step_) {
    running_.mean.resize(graph_.nodes.size());
    running_.var.resize(graph_.nodes.size());
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      if (graph_.nodes[i].op != Op::kBatchNorm) continue;
      running_.mean[i].assign(graph_.nodes[i].out.c, 0.0f);
      running_.var[i].assign(graph_.nodes[i].out.c, 1.0f);
    }
  }

  // Builds a plan of `batch` and runs it once; the last node's output, in plain layout.
  std::vector<float> Run(int batch, bool training, float* params, float* images) {
    plan_.batch = batch;
    plan_.training = training;
    plan_.nodes.resize(graph_.nodes.size());
    for (size_t i = 0; i < graph_.nodes.size(); ++i) forward_.Build(plan_, static_cast<int>(i));
    plan_.input.set_data_handle(images);
    for (auto& [mem, offset] : plan_.param_bindings) mem.set_data_handle(params + offset);
    for (auto& step : plan_.forward) step();
    steps_.stream().wait();
    const memory& out = plan_.nodes.back().out;
    const float* data = static_cast<const float*>(out.get_data_handle());
    return std::vector<float>(data, data + out.get_desc().get_size() / sizeof(float));
  }

  const Plan& plan() const { return plan_; }
  RunningStatistics& running() { return running_; }
  void set_step(int64_t step) { step_ = step; }

 private:
  const Graph graph_;
  PlanSteps steps_;
  RunningStatistics running_;
  int64_t step_ = 0;
  ForwardPrimitives forward_;
  Plan plan_;
};

TEST(ForwardPrimitivesTest, LinearThenReluComputesTheLayer) {
  GraphBuilder b("fc", Shape{2, 1, 1}, 2);
  b.Relu(b.Linear(0, "fc", 2), "relu");
  ForwardHarness h(b.Finish(), 1);
  // W = [[1, 2], [-3, 1]], bias [0.5, -1]; x = [1, 1]: y = [3.5, -3], relu [3.5, 0].
  std::vector<float> params = {1, 2, -3, 1, 0.5f, -1};
  std::vector<float> images = {1, 1};
  EXPECT_EQ(h.Run(1, /*training=*/false, params.data(), images.data()),
            (std::vector<float>{3.5f, 0.0f}));
  EXPECT_EQ(h.plan().param_bindings.size(), 2u);
  EXPECT_TRUE(h.plan().backward.empty());
}

TEST(ForwardPrimitivesTest, TrainingBatchNormUpdatesTheRunningStatistics) {
  GraphBuilder b("bn", Shape{1, 1, 2}, 2);
  b.BatchNorm(0, "bn");
  ForwardHarness h(b.Finish(), 1);
  std::vector<float> params = {1, 0};  // scale 1, shift 0
  // One channel, values 1 3 5 7: mean 4, variance 5 (20/3 unbiased).
  std::vector<float> images = {1, 3, 5, 7};
  const std::vector<float> out = h.Run(2, /*training=*/true, params.data(), images.data());
  const float inv_std = 1.0f / std::sqrt(5.0f + kBnEpsilon);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_FLOAT_EQ(out[0], -3 * inv_std);
  EXPECT_FLOAT_EQ(out[3], 3 * inv_std);
  EXPECT_FLOAT_EQ(h.running().mean[1][0], 0.1f * 4);
  EXPECT_FLOAT_EQ(h.running().var[1][0], 0.9f + 0.1f * 5 * (4.0f / 3));
}

TEST(ForwardPrimitivesTest, TrainingDropoutAppliesTheSeededMask) {
  GraphBuilder b("dropout", Shape{2, 2, 2}, 2);
  b.Dropout(0, "dropout", 0.5f);
  ForwardHarness h(b.Finish(), /*seed=*/9);
  h.set_step(3);  // read when the step runs
  std::vector<float> images = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<float> out = h.Run(1, /*training=*/true, nullptr, images.data());
  std::vector<float> expected;
  for (int j = 0; j < 8; ++j)
    expected.push_back(DropoutKeep(9, 3, 1, j, 0.5f) ? 2.0f * (j + 1) : 0);
  EXPECT_EQ(out, expected);
}

TEST(ForwardPrimitivesTest, InferenceDropoutIsTheInputItself) {
  GraphBuilder b("dropout", Shape{2, 1, 1}, 2);
  b.Dropout(0, "dropout", 0.5f);
  ForwardHarness h(b.Finish(), 9);
  std::vector<float> images = {1, 2};
  EXPECT_EQ(h.Run(1, /*training=*/false, nullptr, images.data()), images);
  EXPECT_EQ(h.plan().nodes[1].out.get_data_handle(), images.data());
  EXPECT_TRUE(h.plan().forward.empty());
}

}  // namespace
}  // namespace r2sp::models::cpu_internal
