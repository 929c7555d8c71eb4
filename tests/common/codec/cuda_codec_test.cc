// The GPU encoders (common/codec/cuda/) against the CPU codecs: fp16 bit-identical over a
// stratified sample of every exponent, NaNs included (and all halves decoded), and
// CudaSparseEncoder choosing the same ids and values and keeping the same residual as
// SparseEncoder over several pushes, for top-k (sampled and exact) and csc, fp32 and fp16
// values, with error feedback and with momentum correction. Skips itself where no GPU is
// visible.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/codec/codec_spec.h"
#include "common/codec/cuda/codec_kernels.h"
#include "common/codec/cuda/cuda_sparse_encoder.h"
#include "common/codec/fp16.h"
#include "common/codec/sparse_encoder.h"
#include "gtest/gtest.h"

namespace r2sp::codec {
namespace {

bool HaveGpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

template <typename T>
T* ToDevice(const std::vector<T>& v) {
  T* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, v.size() * sizeof(T) + 1), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return d;
}

template <typename T>
std::vector<T> ToHost(const T* d, size_t n) {
  std::vector<T> v(n);
  EXPECT_EQ(cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

// "" when `got` and `want` hold the same bits, else the first element that differs, in hex.
template <typename T>
std::string FirstDifference(const std::vector<T>& got, const std::vector<T>& want,
                            const std::vector<uint32_t>& inputs) {
  static_assert(sizeof(T) <= sizeof(uint32_t));
  if (got.size() != want.size()) return "sizes differ";
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) == 0) continue;
    uint32_t g = 0, w = 0;
    std::memcpy(&g, &got[i], sizeof(T));
    std::memcpy(&w, &want[i], sizeof(T));
    char text[96];
    std::snprintf(text, sizeof(text), "element %zu, input 0x%08x: GPU 0x%x, CPU 0x%x", i,
                  inputs[i], g, w);
    return text;
  }
  return "";
}

class CudaCodecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device visible";
  }
};

TEST_F(CudaCodecTest, Fp16MatchesTheCpuCodecBitForBit) {
  // Every exponent and sign with 2^15 mantissas each (low bits varied), plus the specials.
  std::vector<uint32_t> bits;
  for (uint32_t top = 0; top < 512; ++top) {
    for (uint32_t m = 0; m < (1u << 15); ++m) bits.push_back(top << 23 | m * 256u | (m & 0xff));
  }
  std::vector<float> in(bits.size());
  std::memcpy(in.data(), bits.data(), bits.size() * sizeof(float));
  std::vector<uint16_t> want(in.size());
  EncodeFp16(in.data(), in.size(), want.data());
  float* d_in = ToDevice(in);
  uint16_t* d_out = nullptr;
  ASSERT_EQ(cudaMalloc(&d_out, in.size() * sizeof(uint16_t)), cudaSuccess);
  ASSERT_EQ(cuda::EncodeFp16(d_in, in.size(), d_out, nullptr), cudaSuccess);
  EXPECT_EQ(FirstDifference(ToHost(d_out, in.size()), want, bits), "");
  // Every half decodes as on the CPU.
  std::vector<uint16_t> halves(65536);
  for (uint32_t h = 0; h < 65536; ++h) halves[h] = static_cast<uint16_t>(h);
  std::vector<float> decoded(65536);
  DecodeFp16(halves.data(), halves.size(), decoded.data());
  uint16_t* d_halves = ToDevice(halves);
  ASSERT_EQ(cuda::DecodeFp16(d_halves, halves.size(), d_in, nullptr), cudaSuccess);
  const std::vector<uint32_t> half_inputs(halves.begin(), halves.end());
  EXPECT_EQ(FirstDifference(ToHost(d_in, 65536), decoded, half_inputs), "");
  cudaFree(d_in);
  cudaFree(d_out);
  cudaFree(d_halves);
}

struct Case {
  std::string spec;
  float momentum_correction;
};

class CudaSparseEncoderTest : public CudaCodecTest, public ::testing::WithParamInterface<Case> {};

TEST_P(CudaSparseEncoderTest, MatchesTheCpuEncoderPushForPush) {
  SparseEncoderOptions options;
  options.spec = *ParseCodecSpec("push_codec", GetParam().spec);
  options.momentum_correction = GetParam().momentum_correction;
  const size_t n = 300000;  // 9 chunks of 32K plus a short one
  SparseEncoder cpu(n, options);
  cuda::CudaSparseEncoder gpu(n, options, nullptr);
  ASSERT_TRUE(gpu.Init().ok());
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  std::vector<float> grad(n);
  for (int push = 0; push < 5; ++push) {
    for (float& g : grad) g = normal(rng);
    float* d_grad = ToDevice(grad);
    SparseGradient want, got;
    cpu.Encode(grad.data(), options.spec.ratio, &want);
    const absl::Status status = gpu.Encode(d_grad, options.spec.ratio, &got);
    cudaFree(d_grad);
    ASSERT_TRUE(status.ok()) << status;
    ASSERT_EQ(got.ids, want.ids) << "push " << push;
    EXPECT_EQ(got.values, want.values) << "push " << push;
    EXPECT_EQ(got.half_values, want.half_values) << "push " << push;
    EXPECT_EQ(got.topk.exact, want.topk.exact);
    const absl::StatusOr<std::vector<float>> residual = gpu.Residual();
    ASSERT_TRUE(residual.ok()) << residual.status();
    EXPECT_EQ(*residual, cpu.residual()) << "push " << push;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Codecs, CudaSparseEncoderTest,
    ::testing::Values(Case{"topk:0.01", 0}, Case{"topk:0.01,fp16", 0},
                      Case{"topk:0.001,exact", 0}, Case{"topk:0.01", 0.9f},
                      Case{"csc:0.2", 0}, Case{"csc:0.3,fp16", 0.9f}),
    [](const auto& info) { return "case" + std::to_string(info.index); });

}  // namespace
}  // namespace r2sp::codec
