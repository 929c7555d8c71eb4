// ForwardPass (models/cuda/cuda_forward.h) on hand-sized graphs whose outputs are known
// exactly: a fully connected layer and ReLU, batch norm's running statistics, seeded dropout.
// Reports itself skipped when no GPU is visible (CI compiles it; the GPU machine runs it).
#include "models/cuda/cuda_forward.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "models/graph.h"
#include "tests/models/cuda_harness.h"

namespace r2sp::models::cuda_internal {
namespace {

using testing::CudaHarness;
using testing::HaveGpu;

class CudaForwardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device visible";
  }
  // The last node's output after one forward pass.
  std::vector<float> Logits(CudaHarness& h, const std::vector<float>& images, bool training) {
    EXPECT_TRUE(h.Forward(images, training).ok());
    const DeviceArray<float>& out = h.plan().nodes.back().out;
    absl::StatusOr<std::vector<float>> host = h.Read(out.ptr, out.count);
    EXPECT_TRUE(host.ok()) << host.status();
    return host.ok() ? *host : std::vector<float>{};
  }
};

TEST_F(CudaForwardTest, LinearThenReluComputesTheLayer) {
  GraphBuilder b("fc", Shape{2, 1, 1}, 2);
  b.Relu(b.Linear(0, "fc", 2), "relu");
  CudaHarness h(b.Finish());
  // W = [[1, 2], [-3, 1]], bias [0.5, -1]; x = [1, 1]: y = [3.5, -3], relu [3.5, 0].
  ASSERT_TRUE(h.Init({1, 2, -3, 1, 0.5f, -1}, 1).ok());
  EXPECT_EQ(Logits(h, {1, 1}, /*training=*/false), (std::vector<float>{3.5f, 0.0f}));
}

TEST_F(CudaForwardTest, TrainingBatchNormUpdatesTheRunningStatistics) {
  GraphBuilder b("bn", Shape{1, 1, 2}, 2);
  b.BatchNorm(0, "bn");
  CudaHarness h(b.Finish());
  ASSERT_TRUE(h.Init({1, 0}, 2).ok());  // scale 1, shift 0
  // One channel, values 1 3 5 7: mean 4, variance 5 (20/3 unbiased).
  const std::vector<float> out = Logits(h, {1, 3, 5, 7}, /*training=*/true);
  const float inv_std = 1.0f / std::sqrt(5.0f + static_cast<float>(kBatchNormEpsilon));
  ASSERT_EQ(out.size(), 4u);
  // cuDNN's reductions and reciprocal square root may round differently from ours.
  EXPECT_NEAR(out[0], -3 * inv_std, 1e-5);
  EXPECT_NEAR(out[3], 3 * inv_std, 1e-5);
  absl::StatusOr<std::vector<float>> mean = h.Read(h.running().mean[1].ptr, 1);
  absl::StatusOr<std::vector<float>> var = h.Read(h.running().var[1].ptr, 1);
  ASSERT_TRUE(mean.ok() && var.ok());
  EXPECT_NEAR((*mean)[0], 0.4, 1e-6);
  EXPECT_NEAR((*var)[0], 0.9 + 0.1 * 20 / 3, 1e-6);
}

TEST_F(CudaForwardTest, TrainingDropoutAppliesTheSeededMask) {
  GraphBuilder b("dropout", Shape{2, 2, 2}, 2);
  b.Dropout(0, "dropout", 0.5f);
  CudaHarness h(b.Finish(), /*seed=*/9);
  ASSERT_TRUE(h.Init({}, 1).ok());
  h.set_step(3);
  std::vector<float> expected;
  for (int j = 0; j < 8; ++j)
    expected.push_back(DropoutKeep(9, 3, 1, j, 0.5f) ? 2.0f * (j + 1) : 0);
  EXPECT_EQ(Logits(h, {1, 2, 3, 4, 5, 6, 7, 8}, /*training=*/true), expected);
}

TEST_F(CudaForwardTest, InferenceDropoutCopiesTheInput) {
  GraphBuilder b("dropout", Shape{2, 1, 1}, 2);
  b.Dropout(0, "dropout", 0.5f);
  CudaHarness h(b.Finish(), 9);
  ASSERT_TRUE(h.Init({}, 1).ok());
  EXPECT_EQ(Logits(h, {1, 2}, /*training=*/false), (std::vector<float>{1, 2}));
}

}  // namespace
}  // namespace r2sp::models::cuda_internal
