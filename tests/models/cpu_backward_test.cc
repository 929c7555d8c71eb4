// BackwardPrimitives (models/cpu/cpu_backward.h) on hand-sized graphs whose gradients are known
// exactly: a fully connected layer's weight and bias gradients, and a node with two consumers
// whose gradient the first writer initialises and the second accumulates into.
#include "models/cpu/cpu_backward.h"

#include <vector>

#include "gtest/gtest.h"
#include "models/cpu/cpu_forward.h"
#include "models/cpu/cpu_plan.h"
#include "models/graph.h"

namespace r2sp::models::cpu_internal {
namespace {

// CpuNetwork's training plan without the network: forward, then backward from the last node,
// with d(loss)/d(logits) given instead of the loss's.
class BackwardHarness {
 public:
  explicit BackwardHarness(Graph graph)
      : graph_(std::move(graph)),
        steps_(graph_),
        forward_(graph_, steps_, &running_, 1, &step_),
        backward_(graph_, steps_) {
    running_.mean.resize(graph_.nodes.size());
    running_.var.resize(graph_.nodes.size());
  }

  // Runs one step of batch 1; fills `grads` (the flat gradient array).
  void Run(float* params, float* images, const std::vector<float>& logits_diff, float* grads) {
    plan_.batch = 1;
    plan_.training = true;
    plan_.nodes.resize(graph_.nodes.size());
    for (size_t i = 0; i < graph_.nodes.size(); ++i) forward_.Build(plan_, static_cast<int>(i));
    for (NodePlan& np : plan_.nodes) np.diff = memory(np.out.get_desc(), steps_.engine());
    written_.assign(graph_.nodes.size(), false);
    written_.back() = true;
    for (int i = static_cast<int>(graph_.nodes.size()) - 1; i > 0; --i) {
      backward_.Build(plan_, i, written_);
    }
    plan_.input.set_data_handle(images);
    for (auto& [mem, offset] : plan_.param_bindings) mem.set_data_handle(params + offset);
    for (auto& [mem, offset] : plan_.grad_bindings) mem.set_data_handle(grads + offset);
    for (auto& step : plan_.forward) step();
    float* diff = static_cast<float*>(plan_.nodes.back().diff.get_data_handle());
    std::copy(logits_diff.begin(), logits_diff.end(), diff);
    for (auto& step : plan_.backward) step();
    steps_.stream().wait();
  }

  // Node i's d(loss)/d(output), plain 2-D.
  std::vector<float> Diff(int i) const {
    const memory& m = plan_.nodes[i].diff;
    const float* data = static_cast<const float*>(m.get_data_handle());
    return std::vector<float>(data, data + m.get_desc().get_size() / sizeof(float));
  }
  const std::vector<bool>& written() const { return written_; }

 private:
  const Graph graph_;
  PlanSteps steps_;
  RunningStatistics running_;
  int64_t step_ = 0;
  ForwardPrimitives forward_;
  BackwardPrimitives backward_;
  Plan plan_;
  std::vector<bool> written_;
};

TEST(BackwardPrimitivesTest, LinearWritesWeightAndBiasGradients) {
  GraphBuilder b("fc", Shape{2, 1, 1}, 2);
  b.Linear(0, "fc", 2);
  BackwardHarness h(b.Finish());
  std::vector<float> params = {1, 2, -3, 1, 0.5f, -1};
  std::vector<float> images = {3, -1};
  std::vector<float> grads(6, 99.0f);
  h.Run(params.data(), images.data(), {1, -2}, grads.data());
  // dW[o][i] = dy[o] x[i], db = dy; the image gets no gradient.
  EXPECT_EQ(grads, (std::vector<float>{3, -1, -6, 2, 1, -2}));
  EXPECT_EQ(h.written(), (std::vector<bool>{false, true}));
}

TEST(BackwardPrimitivesTest, ASecondConsumerAccumulatesIntoTheGradient) {
  // fc -> relu -> add(relu, fc): fc's output feeds two nodes.
  GraphBuilder b("residual", Shape{2, 1, 1}, 2);
  const int fc = b.Linear(0, "fc", 2);
  b.Add(b.Relu(fc, "relu"), fc, "add");
  BackwardHarness h(b.Finish());
  std::vector<float> params = {1, 0, 0, 1, 0, 0};  // identity, no bias
  std::vector<float> images = {2, -3};             // fc = [2, -3], relu = [2, 0]
  std::vector<float> grads(6, 99.0f);
  h.Run(params.data(), images.data(), {1, 1}, grads.data());
  // The add initialises d(fc) = [1, 1]; the relu adds [1, 0].
  EXPECT_EQ(h.Diff(fc), (std::vector<float>{2, 1}));
  EXPECT_EQ(h.Diff(2), (std::vector<float>{1, 1}));
  EXPECT_EQ(grads, (std::vector<float>{4, -6, 2, -3, 2, 1}));
  EXPECT_EQ(h.written(), (std::vector<bool>{false, true, true, true}));
}

}  // namespace
}  // namespace r2sp::models::cpu_internal
