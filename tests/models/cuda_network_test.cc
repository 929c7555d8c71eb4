// The CUDA backend against the CPU backend on random inputs: logits, loss, every gradient and
// evaluation, for the three models and a dropout graph; its copy pipeline: parameters uploaded
// group by group as the host gets them, gradients reported group by group as they land (fp32,
// or encoded to fp16 on the device), pinned host arrays, the device spans. Reports itself skipped
// when no GPU is visible (CI compiles it; the GPU machine runs it).
#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "common/codec/fp16.h"
#include "gtest/gtest.h"
#include "models/cpu/cpu_network.h"
#include "models/cuda/cuda_network.h"
#include "common/host_array.h"

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

// One random batch for `g`.
struct Batch {
  std::vector<float> images;
  std::vector<int32_t> labels;
};
// Without TF32: steps comparable value by value.
CudaOptions Precise() {
  CudaOptions o;
  o.allow_tf32 = false;
  return o;
}

Batch RandomBatch(const Graph& g, int batch) {
  Batch b;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  b.images.resize(static_cast<size_t>(batch) * g.input.size());
  for (float& x : b.images) x = normal(rng);
  for (int k = 0; k < batch; ++k) b.labels.push_back(static_cast<int32_t>(rng() % g.num_classes));
  return b;
}

// Parameters the host writes only when the forward asks for them (a pull overlapping it, whose
// uploads are then queued group by group) give the same step as parameters there from the start;
// every group is asked for once, first layer first.
TEST_F(CudaNetworkTest, ParamsAskedForLayerByLayerGiveTheSameStep) {
  for (const Graph& g : {BuildCnn({1, 28, 28}, 10), BuildResNet20({3, 32, 32}, 10)}) {
    SCOPED_TRACE(g.name);
    std::vector<float> params(g.num_parameters()), grads(params.size()), late_grads(params.size());
    std::vector<float> arriving(params.size());
    InitParams(g, 1, params.data());
    const Batch b = RandomBatch(g, 8);
    auto net = CreateCudaNetwork(g, Precise());
    ASSERT_TRUE(net.ok()) << net.status();
    std::vector<std::pair<int64_t, int64_t>> ranges;
    auto ask = [&](int64_t offset, int64_t count) {
      ranges.emplace_back(offset, count);
      std::memcpy(arriving.data() + offset, params.data() + offset, count * sizeof(float));
    };
    for (int step = 0; step < 2; ++step) {
      (*net)->set_params_needed(nullptr);
      (*net)->set_step(step);
      absl::StatusOr<float> loss =
          (*net)->TrainStep(params.data(), b.images.data(), b.labels.data(), 8, grads.data());
      ranges.clear();
      arriving.assign(params.size(), 1e30f);
      EXPECT_TRUE((*net)->set_params_needed(ask));
      (*net)->set_step(step);
      absl::StatusOr<float> late_loss = (*net)->TrainStep(arriving.data(), b.images.data(),
                                                          b.labels.data(), 8, late_grads.data());
      ASSERT_TRUE(loss.ok() && late_loss.ok()) << late_loss.status();
      EXPECT_NEAR(*late_loss, *loss, 1e-5 * std::max(1.0f, std::abs(*loss)));
      double scale = 0;
      for (float v : grads) scale = std::max(scale, static_cast<double>(std::abs(v)));
      for (size_t k = 0; k < params.size(); ++k) {
        ASSERT_NEAR(late_grads[k], grads[k], 1e-5 * scale + 1e-7) << "gradient " << k;
      }
      int64_t next = 0;
      for (const auto& [offset, count] : ranges) {
        EXPECT_EQ(offset, next) << "first layer first, each parameter once";
        next = offset + count;
      }
      EXPECT_EQ(next, static_cast<int64_t>(params.size()));
    }
  }
}

// Every parameter group is reported once, last layer first, and is final when reported (the
// copy pipeline reports a group once its device-to-host copy has landed).
TEST_F(CudaNetworkTest, GradientsAreReportedByLayerAsTheyLand) {
  for (const Graph& g : {BuildCnn({1, 28, 28}, 10), BuildResNet20({3, 32, 32}, 10)}) {
    SCOPED_TRACE(g.name);
    std::vector<float> params(g.num_parameters()), grads(params.size(), -7.0f);
    std::vector<float> seen(params.size(), -7.0f);
    InitParams(g, 1, params.data());
    const Batch b = RandomBatch(g, 8);
    auto net = CreateCudaNetwork(g, CudaOptions());
    ASSERT_TRUE(net.ok()) << net.status();
    std::vector<std::pair<int64_t, int64_t>> ranges;
    (*net)->set_gradient_ready([&](int64_t offset, int64_t count) {
      ranges.emplace_back(offset, count);
      std::memcpy(seen.data() + offset, grads.data() + offset, count * sizeof(float));
    });
    const std::vector<ParamGroup> groups = g.ParamGroups();
    for (int step = 0; step < 2; ++step) {
      ranges.clear();
      ASSERT_TRUE((*net)->TrainStep(params.data(), b.images.data(), b.labels.data(), 8,
                                    grads.data()).ok());
      ASSERT_EQ(ranges.size(), groups.size());
      for (size_t k = 0; k < groups.size(); ++k) {
        const ParamGroup& expected = groups[groups.size() - 1 - k];
        EXPECT_EQ(ranges[k], std::make_pair(expected.offset, expected.count));
      }
      EXPECT_EQ(seen, grads);
    }
  }
}

// Pinned host arrays give the same step as pageable ones; the last step's device spans are
// the parameters' upload and the gradients' download, in order; pinning twice is an error
// that leaves the memory usable.
TEST_F(CudaNetworkTest, PinnedArraysGiveTheSameStepAndSpans) {
  const Graph g = BuildCnn({1, 28, 28}, 10);
  std::vector<float> params(g.num_parameters()), pageable_grads(params.size());
  HostArray pinned_params(params.begin(), params.end()), pinned_grads(params.size());
  InitParams(g, 1, params.data());
  pinned_params.assign(params.begin(), params.end());
  const Batch b = RandomBatch(g, 16);
  auto net = CreateCudaNetwork(g, Precise());
  ASSERT_TRUE(net.ok()) << net.status();
  EXPECT_TRUE((*net)->LastStepDeviceSpans().empty());
  auto pin_params = (*net)->PinHostMemory(pinned_params.data(), params.size() * sizeof(float));
  auto pin_grads = (*net)->PinHostMemory(pinned_grads.data(), params.size() * sizeof(float));
  ASSERT_TRUE(pin_params.ok()) << pin_params.status();
  ASSERT_TRUE(pin_grads.ok()) << pin_grads.status();
  EXPECT_FALSE((*net)->PinHostMemory(pinned_grads.data(), params.size() * sizeof(float)).ok());
  auto loss_pageable = (*net)->TrainStep(params.data(), b.images.data(), b.labels.data(), 16,
                                         pageable_grads.data());
  auto loss_pinned = (*net)->TrainStep(pinned_params.data(), b.images.data(), b.labels.data(),
                                       16, pinned_grads.data());
  ASSERT_TRUE(loss_pageable.ok() && loss_pinned.ok());
  EXPECT_NEAR(*loss_pinned, *loss_pageable, 1e-5);
  double scale = 0;
  for (float v : pageable_grads) scale = std::max(scale, static_cast<double>(std::abs(v)));
  for (size_t k = 0; k < params.size(); ++k) {
    // The same algorithms on the same data; only atomics' order may differ.
    ASSERT_NEAR(pinned_grads[k], pageable_grads[k], 1e-5 * scale + 1e-7) << "gradient " << k;
  }
  const std::vector<DeviceSpan> spans = (*net)->LastStepDeviceSpans();
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].name, "h2d_params");
  EXPECT_EQ(spans[1].name, "d2h_grads");
  for (const DeviceSpan& s : spans) {
    EXPECT_GE(s.begin_seconds, 0);
    EXPECT_GT(s.end_seconds, s.begin_seconds) << s.name;
    EXPECT_LT(s.end_seconds, 10) << s.name;
  }
  EXPECT_LE(spans[0].end_seconds, spans[1].end_seconds);
}

// With set_fp16_gradients the backend encodes on the device and copies binary16 out: the
// values are the fp32 gradient rounded to nearest even (within the ordering of atomics between
// two steps), every group is reported once, last first, final when reported, and with the
// setting cleared the fp32 gradient comes back.
TEST_F(CudaNetworkTest, Fp16GradientsAreTheFp32OnesEncodedOnTheDevice) {
  for (const Graph& g : {BuildCnn({1, 28, 28}, 10), BuildResNet20({3, 32, 32}, 10)}) {
    SCOPED_TRACE(g.name);
    std::vector<float> params(g.num_parameters()), grads(params.size()), again(params.size());
    std::vector<uint16_t, PageAlignedAllocator<uint16_t>> half(params.size(), 0xFFFF);
    std::vector<uint16_t> seen(params.size(), 0xFFFF);
    InitParams(g, 1, params.data());
    const Batch b = RandomBatch(g, 8);
    auto net = CreateCudaNetwork(g, Precise());
    ASSERT_TRUE(net.ok()) << net.status();
    auto pin = (*net)->PinHostMemory(half.data(), half.size() * sizeof(uint16_t));
    ASSERT_TRUE(pin.ok()) << pin.status();
    ASSERT_TRUE((*net)->TrainStep(params.data(), b.images.data(), b.labels.data(), 8,
                                  grads.data()).ok());
    ASSERT_TRUE((*net)->set_fp16_gradients(half.data()));
    std::vector<std::pair<int64_t, int64_t>> ranges;
    (*net)->set_gradient_ready([&](int64_t offset, int64_t count) {
      ranges.emplace_back(offset, count);
      std::memcpy(seen.data() + offset, half.data() + offset, count * sizeof(uint16_t));
    });
    std::vector<float> untouched(params.size(), -7.0f);
    ASSERT_TRUE((*net)->TrainStep(params.data(), b.images.data(), b.labels.data(), 8,
                                  untouched.data()).ok());
    EXPECT_EQ(untouched, std::vector<float>(params.size(), -7.0f));  // fp32 not copied out
    const std::vector<ParamGroup> groups = g.ParamGroups();
    ASSERT_EQ(ranges.size(), groups.size());
    for (size_t k = 0; k < groups.size(); ++k) {
      const ParamGroup& expected = groups[groups.size() - 1 - k];
      EXPECT_EQ(ranges[k], std::make_pair(expected.offset, expected.count));
    }
    EXPECT_EQ(seen, std::vector<uint16_t>(half.begin(), half.end()));
    std::vector<uint16_t> encoded(params.size());
    codec::EncodeFp16(grads.data(), grads.size(), encoded.data());
    double scale = 0;
    for (float v : grads) scale = std::max(scale, static_cast<double>(std::abs(v)));
    size_t exact = 0;
    for (size_t k = 0; k < params.size(); ++k) {
      exact += half[k] == encoded[k];
      // Half a binary16 ulp, relative (2^-11), or of its subnormals' spacing (2^-25).
      const double rounding = std::max(std::abs(grads[k]) * 0x1p-11, 0x1p-25);
      ASSERT_NEAR(codec::HalfToFloat(half[k]), grads[k], rounding + 1e-5 * scale)
          << "gradient " << k;
    }
    EXPECT_GT(exact, params.size() * 9 / 10);
    const std::vector<DeviceSpan> spans = (*net)->LastStepDeviceSpans();
    ASSERT_EQ(spans.size(), 2u);
    EXPECT_GT(spans[1].end_seconds, spans[1].begin_seconds);
    EXPECT_FALSE((*net)->set_fp16_gradients(nullptr));
    ASSERT_TRUE((*net)->TrainStep(params.data(), b.images.data(), b.labels.data(), 8,
                                  again.data()).ok());
    for (size_t k = 0; k < params.size(); ++k) {
      ASSERT_NEAR(again[k], grads[k], 1e-5 * scale + 1e-7) << "gradient " << k;
    }
  }
}

// Running statistics after the same steps match the CPU backend's and move into another GPU
// network, which then evaluates as the first.
TEST_F(CudaNetworkTest, BatchNormStatisticsMatchCpuAndMove) {
  const Graph g = BuildResNet20({3, 32, 32}, 10);
  std::vector<float> params(g.num_parameters()), grads(params.size());
  InitParams(g, 1, params.data());
  const Batch b = RandomBatch(g, 4);
  auto gpu = CreateCudaNetwork(g, Precise());
  auto fresh = CreateCudaNetwork(g, Precise());
  auto cpu = CreateCpuNetwork(g, CpuOptions());
  ASSERT_TRUE(gpu.ok() && fresh.ok() && cpu.ok());
  for (int s = 0; s < 2; ++s) {
    ASSERT_TRUE((*gpu)->TrainStep(params.data(), b.images.data(), b.labels.data(), 4,
                                  grads.data()).ok());
    ASSERT_TRUE((*cpu)->TrainStep(params.data(), b.images.data(), b.labels.data(), 4,
                                  grads.data()).ok());
  }
  const std::vector<float> stats = (*gpu)->BatchNormStatistics();
  const std::vector<float> want = (*cpu)->BatchNormStatistics();
  ASSERT_EQ(stats.size(), static_cast<size_t>(g.BatchNormStatisticsSize()));
  ASSERT_EQ(want.size(), stats.size());
  for (size_t k = 0; k < stats.size(); ++k) {
    ASSERT_NEAR(stats[k], want[k], 1e-3 * std::max(1.0f, std::abs(want[k]))) << k;
  }
  ASSERT_TRUE((*fresh)->SetBatchNormStatistics(stats).ok());
  auto e1 = (*gpu)->Evaluate(params.data(), b.images.data(), b.labels.data(), 4);
  auto e2 = (*fresh)->Evaluate(params.data(), b.images.data(), b.labels.data(), 4);
  ASSERT_TRUE(e1.ok() && e2.ok());
  EXPECT_NEAR(e1->loss_sum, e2->loss_sum, 1e-5 * std::max(1.0, e1->loss_sum));
  EXPECT_TRUE(absl::IsInvalidArgument((*fresh)->SetBatchNormStatistics({1.0f})));
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
