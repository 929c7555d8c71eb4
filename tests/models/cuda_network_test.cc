// The CUDA backend against the CPU backend on random inputs: logits, loss, every gradient and
// evaluation, for the three models and a dropout graph. Reports itself skipped when no GPU is
// visible (CI compiles it; the GPU machine runs it).
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "models/cpu/cpu_network.h"
#include "models/cuda/cuda_network.h"

namespace r2sp::models {
namespace {

class CudaNetworkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device visible";
  }

  // Trains `steps` steps on both backends from the same parameters and compares.
  void Compare(const Graph& g, int batch, bool allow_tf32, double rtol, int steps = 2) {
    SCOPED_TRACE(g.name);
    std::vector<float> params(g.num_parameters());
    InitParams(g, 3, params.data());
    std::mt19937 rng(5);
    std::normal_distribution<float> normal;
    std::vector<float> images(static_cast<size_t>(batch) * g.input.size());
    for (float& x : images) x = normal(rng);
    std::vector<int32_t> labels(batch);
    for (int32_t& l : labels) l = static_cast<int32_t>(rng() % g.num_classes);
    CpuOptions cpu_options;
    cpu_options.seed = 9;
    CudaOptions cuda_options;
    cuda_options.seed = 9;
    cuda_options.allow_tf32 = allow_tf32;
    auto cpu = CreateCpuNetwork(g, cpu_options);
    auto gpu = CreateCudaNetwork(g, cuda_options);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    std::vector<float> g_cpu(params.size()), g_gpu(params.size());
    for (int s = 0; s < steps; ++s) {
      absl::StatusOr<float> l_cpu =
          (*cpu)->TrainStep(params.data(), images.data(), labels.data(), batch, g_cpu.data());
      absl::StatusOr<float> l_gpu =
          (*gpu)->TrainStep(params.data(), images.data(), labels.data(), batch, g_gpu.data());
      ASSERT_TRUE(l_cpu.ok() && l_gpu.ok()) << l_gpu.status();
      EXPECT_NEAR(*l_gpu, *l_cpu, rtol * std::max(1.0f, std::abs(*l_cpu)));
      double scale = 0;
      for (float v : g_cpu) scale = std::max(scale, static_cast<double>(std::abs(v)));
      for (size_t k = 0; k < params.size(); ++k) {
        ASSERT_NEAR(g_gpu[k], g_cpu[k], rtol * scale + 1e-6) << "gradient " << k << " step " << s;
      }
      for (size_t k = 0; k < params.size(); ++k) params[k] -= 0.01f * g_cpu[k];
    }
    absl::StatusOr<EvalResult> e_cpu =
        (*cpu)->Evaluate(params.data(), images.data(), labels.data(), batch);
    absl::StatusOr<EvalResult> e_gpu =
        (*gpu)->Evaluate(params.data(), images.data(), labels.data(), batch);
    ASSERT_TRUE(e_cpu.ok() && e_gpu.ok()) << e_gpu.status();
    EXPECT_NEAR(e_gpu->loss_sum, e_cpu->loss_sum, rtol * std::max(1.0, e_cpu->loss_sum));
  }
};

TEST_F(CudaNetworkTest, MlpMatchesCpu) { Compare(BuildMlp({1, 28, 28}, 10), 16, false, 1e-4); }

TEST_F(CudaNetworkTest, CnnMatchesCpu) { Compare(BuildCnn({1, 28, 28}, 10), 8, false, 1e-4); }

TEST_F(CudaNetworkTest, ResNet20MatchesCpu) {
  Compare(BuildResNet20({3, 32, 32}, 10), 4, false, 1e-3);
}

TEST_F(CudaNetworkTest, CnnWithTf32IsClose) { Compare(BuildCnn({1, 28, 28}, 10), 8, true, 2e-2); }

TEST_F(CudaNetworkTest, DropoutMasksMatchCpu) {
  GraphBuilder b("dropout", {1, 6, 6}, 4);
  int x = b.Linear(0, "fc1", 32);
  x = b.Relu(x, "r");
  x = b.Dropout(x, "drop", 0.5f);
  b.Linear(x, "fc2", 4);
  Compare(b.Finish(), 8, false, 1e-4);
}

TEST_F(CudaNetworkTest, BadLabelIsAnError) {
  const Graph g = BuildMlp({1, 28, 28}, 10);
  std::vector<float> params(g.num_parameters()), grads(params.size()), images(2 * 784);
  std::vector<int32_t> labels = {1, 12};
  auto gpu = CreateCudaNetwork(g, CudaOptions());
  ASSERT_TRUE(gpu.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(
      (*gpu)->TrainStep(params.data(), images.data(), labels.data(), 2, grads.data()).status()));
}

}  // namespace
}  // namespace r2sp::models
