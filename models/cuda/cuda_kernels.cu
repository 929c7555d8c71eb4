// The CUDA backend's own kernels; see cuda_kernels.h.
#include <cmath>
#include <cstdint>

#include "models/cuda/cuda_kernels.h"
#include "models/dropout_hash.h"

namespace r2sp::models::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void SoftmaxCrossEntropyKernel(const float* logits, const int32_t* labels, int n,
                                          int classes, float* loss, int32_t* correct,
                                          float* grad) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float* z = logits + static_cast<int64_t>(i) * classes;
  const int label = labels[i];
  float max = z[0];
  int arg = 0;
  for (int k = 1; k < classes; ++k) {
    if (z[k] > max) {
      max = z[k];
      arg = k;
    }
  }
  double sum = 0;
  for (int k = 0; k < classes; ++k) sum += exp(static_cast<double>(z[k] - max));
  const double log_sum = log(sum);
  const bool valid = label >= 0 && label < classes;
  loss[i] = valid ? static_cast<float>(log_sum - (z[label] - max)) : nanf("");
  correct[i] = valid && arg == label;
  if (grad != nullptr) {
    float* g = grad + static_cast<int64_t>(i) * classes;
    const float inv_n = 1.0f / n;
    for (int k = 0; k < classes; ++k) {
      const float p = static_cast<float>(exp(static_cast<double>(z[k] - max) - log_sum));
      g[k] = (p - (k == label ? 1.0f : 0.0f)) * inv_n;
    }
  }
}

__global__ void DropoutKernel(const float* x, float* y, float* mask, int64_t count, uint64_t seed,
                              int64_t step, int node, float p, float scale) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float m = DropoutKeepHash(seed, step, node, i, p) ? scale : 0.0f;
    mask[i] = m;
    y[i] = x[i] * m;
  }
}

__global__ void MultiplyAccumulateKernel(const float* a, const float* b, float* out,
                                         int64_t count, float beta) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = a[i] * b[i] + (beta == 0.0f ? 0.0f : beta * out[i]);
  }
}

int Blocks(int64_t count) {
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

}  // namespace

cudaError_t SoftmaxCrossEntropy(const float* logits, const int32_t* labels, int n, int classes,
                                float* loss, int32_t* correct, float* grad, cudaStream_t stream) {
  SoftmaxCrossEntropyKernel<<<Blocks(n), kThreads, 0, stream>>>(logits, labels, n, classes, loss,
                                                                 correct, grad);
  return cudaGetLastError();
}

cudaError_t DropoutForward(const float* x, float* y, float* mask, int64_t count, uint64_t seed,
                           int64_t step, int node, float p, cudaStream_t stream) {
  DropoutKernel<<<Blocks(count), kThreads, 0, stream>>>(x, y, mask, count, seed, step, node, p,
                                                         1.0f / (1.0f - p));
  return cudaGetLastError();
}

cudaError_t MultiplyAccumulate(const float* a, const float* b, float* out, int64_t count,
                               float beta, cudaStream_t stream) {
  MultiplyAccumulateKernel<<<Blocks(count), kThreads, 0, stream>>>(a, b, out, count, beta);
  return cudaGetLastError();
}

}  // namespace r2sp::models::cuda
