// BackwardPass (models/cuda/cuda_backward.h) on hand-sized graphs whose gradients are known
// exactly: a fully connected layer's weight and bias gradients, and a node with two consumers
// whose gradient the first writer initialises and the second accumulates into. Reports itself
// skipped when no GPU is visible (CI compiles it; the GPU machine runs it).
#include "models/cuda/cuda_backward.h"

#include <vector>

#include "gtest/gtest.h"
#include "models/graph.h"
#include "tests/models/cuda_harness.h"

namespace r2sp::models::cuda_internal {
namespace {

using testing::CudaHarness;
using testing::HaveGpu;

class CudaBackwardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device visible";
  }
  std::vector<float> Grads(CudaHarness& h) {
    absl::StatusOr<std::vector<float>> host = h.Read(h.device().grads.ptr, h.device().grads.count);
    EXPECT_TRUE(host.ok()) << host.status();
    return host.ok() ? *host : std::vector<float>{};
  }
};

TEST_F(CudaBackwardTest, LinearWritesWeightAndBiasGradients) {
  GraphBuilder b("fc", Shape{2, 1, 1}, 2);
  b.Linear(0, "fc", 2);
  CudaHarness h(b.Finish());
  ASSERT_TRUE(h.Init({1, 2, -3, 1, 0.5f, -1}, 1).ok());
  ASSERT_TRUE(h.Forward({3, -1}, /*training=*/true).ok());
  ASSERT_TRUE(h.Backward({1, -2}).ok());
  // dW[o][i] = dy[o] x[i], db = dy.
  EXPECT_EQ(Grads(h), (std::vector<float>{3, -1, -6, 2, 1, -2}));
}

TEST_F(CudaBackwardTest, ASecondConsumerAccumulatesIntoTheGradient) {
  // fc -> relu -> add(relu, fc): fc's output feeds two nodes.
  GraphBuilder b("residual", Shape{2, 1, 1}, 2);
  const int fc = b.Linear(0, "fc", 2);
  b.Add(b.Relu(fc, "relu"), fc, "add");
  CudaHarness h(b.Finish());
  ASSERT_TRUE(h.Init({1, 0, 0, 1, 0, 0}, 1).ok());          // identity, no bias
  ASSERT_TRUE(h.Forward({2, -3}, /*training=*/true).ok());  // fc = [2, -3], relu = [2, 0]
  ASSERT_TRUE(h.Backward({1, 1}).ok());
  // The add initialises d(fc) = [1, 1]; the relu adds [1, 0].
  absl::StatusOr<std::vector<float>> fc_diff = h.Read(h.plan().nodes[fc].diff.ptr, 2);
  ASSERT_TRUE(fc_diff.ok());
  EXPECT_EQ(*fc_diff, (std::vector<float>{2, 1}));
  EXPECT_EQ(Grads(h), (std::vector<float>{4, -6, 2, -3, 2, 1}));
}

}  // namespace
}  // namespace r2sp::models::cuda_internal
