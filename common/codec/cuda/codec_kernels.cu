// See codec_kernels.h.
#include "common/codec/cuda/codec_kernels.h"

#include <cuda_fp16.h>

#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

namespace r2sp::codec::cuda {
namespace {

constexpr int kThreads = 256;

int Blocks(size_t n) {
  const size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 * 16 ? (blocks > 0 ? blocks : 1) : 65535 * 16);
}

__device__ inline uint32_t Key(float x) { return __float_as_uint(x) & 0x7fffffffu; }

// CUDA's conversions give one canonical NaN; the CPU codec (F16C) keeps a NaN's sign and top
// payload bits and makes it quiet. These do the same, so both sides agree bit for bit.
__device__ inline uint16_t ToHalf(float x) {
  if (!isnan(x)) return __half_as_ushort(__float2half_rn(x));
  const uint32_t bits = __float_as_uint(x);
  return static_cast<uint16_t>(((bits >> 16) & 0x8000u) | 0x7e00u | ((bits & 0x7fffffu) >> 13));
}
__device__ inline float FromHalf(uint16_t h) {
  if ((h & 0x7c00u) != 0x7c00u || (h & 0x3ffu) == 0) return __half2float(__ushort_as_half(h));
  return __uint_as_float((static_cast<uint32_t>(h & 0x8000u) << 16) | 0x7fc00000u |
                         (static_cast<uint32_t>(h & 0x1ffu) << 13));
}

__global__ void EncodeFp16Kernel(const float* in, size_t n, uint16_t* out) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    out[i] = ToHalf(in[i]);
  }
}

__global__ void DecodeFp16Kernel(const uint16_t* in, size_t n, float* out) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    out[i] = FromHalf(in[i]);
  }
}

__global__ void AccumulateKernel(Accumulate how, float mu, const float* grad, float* velocity,
                                 float* residual, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    if (how == Accumulate::kCopy) {
      residual[i] = grad[i];
    } else if (how == Accumulate::kAdd) {
      residual[i] += grad[i];
    } else {
      const float u = mu * velocity[i] + grad[i];
      velocity[i] = u;
      residual[i] += u;
    }
  }
}

__global__ void GatherKeysKernel(const float* v, size_t stride, size_t m, uint32_t* keys) {
  for (size_t j = blockIdx.x * size_t{blockDim.x} + threadIdx.x; j < m;
       j += size_t{gridDim.x} * blockDim.x) {
    keys[j] = Key(v[j * stride + stride / 2]);
  }
}

__global__ void CountAtLeastKernel(const float* v, size_t n, uint32_t threshold,
                                   unsigned long long* count) {
  unsigned int mine = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    mine += Key(v[i]) >= threshold;
  }
  for (int offset = 16; offset > 0; offset /= 2) mine += __shfl_down_sync(0xffffffffu, mine, offset);
  if ((threadIdx.x & 31) == 0 && mine > 0) atomicAdd(count, static_cast<unsigned long long>(mine));
}

struct AtLeast {
  const float* v;
  uint32_t threshold;
  __device__ bool operator()(uint32_t i) const { return Key(v[i]) >= threshold; }
};

__device__ inline void Take(float* residual, float* velocity, size_t i, bool half, void* out,
                            size_t j) {
  const float r = residual[i];
  if (half) {
    const uint16_t h = ToHalf(r);
    static_cast<uint16_t*>(out)[j] = h;
    residual[i] = r - FromHalf(h);
  } else {
    static_cast<float*>(out)[j] = r;
    residual[i] = 0.0f;
  }
  if (velocity != nullptr) velocity[i] = 0.0f;
}

__global__ void TakeValuesKernel(float* residual, float* velocity, const uint32_t* ids,
                                 size_t count, bool half, void* out) {
  for (size_t j = blockIdx.x * size_t{blockDim.x} + threadIdx.x; j < count;
       j += size_t{gridDim.x} * blockDim.x) {
    Take(residual, velocity, ids[j], half, out, j);
  }
}

// One block per chunk; the block's partial sums meet in shared memory.
__global__ void ChunkNormsKernel(const float* v, size_t n, uint32_t chunk, float* norms) {
  __shared__ float partial[kThreads];
  const size_t begin = size_t{blockIdx.x} * chunk;
  const size_t end = begin + chunk < n ? begin + chunk : n;
  float sum = 0.0f;
  for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x) sum += v[i] * v[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) norms[blockIdx.x] = partial[0];
}

__global__ void TakeChunksKernel(float* residual, float* velocity, const uint32_t* ids,
                                 size_t count, uint32_t chunk, size_t n, bool half, void* out) {
  const size_t total = count * chunk;
  for (size_t e = blockIdx.x * size_t{blockDim.x} + threadIdx.x; e < total;
       e += size_t{gridDim.x} * blockDim.x) {
    const size_t i = size_t{ids[e / chunk]} * chunk + e % chunk;
    if (i < n) Take(residual, velocity, i, half, out, e);
  }
}

}  // namespace

cudaError_t EncodeFp16(const float* in, size_t n, uint16_t* out, cudaStream_t stream) {
  EncodeFp16Kernel<<<Blocks(n), kThreads, 0, stream>>>(in, n, out);
  return cudaGetLastError();
}

cudaError_t DecodeFp16(const uint16_t* in, size_t n, float* out, cudaStream_t stream) {
  DecodeFp16Kernel<<<Blocks(n), kThreads, 0, stream>>>(in, n, out);
  return cudaGetLastError();
}

cudaError_t AccumulateGradient(Accumulate how, float mu, const float* grad, float* velocity,
                               float* residual, size_t n, cudaStream_t stream) {
  AccumulateKernel<<<Blocks(n), kThreads, 0, stream>>>(how, mu, grad, velocity, residual, n);
  return cudaGetLastError();
}

cudaError_t GatherKeys(const float* v, size_t stride, size_t m, uint32_t* keys,
                       cudaStream_t stream) {
  GatherKeysKernel<<<Blocks(m), kThreads, 0, stream>>>(v, stride, m, keys);
  return cudaGetLastError();
}

cudaError_t CountAtLeast(const float* v, size_t n, uint32_t threshold,
                         unsigned long long* count, cudaStream_t stream) {
  cudaError_t error = cudaMemsetAsync(count, 0, sizeof(*count), stream);
  if (error != cudaSuccess) return error;
  CountAtLeastKernel<<<Blocks(n), kThreads, 0, stream>>>(v, n, threshold, count);
  return cudaGetLastError();
}

size_t CollectAtLeastTempBytes(size_t n) {
  size_t bytes = 0;
  cub::DeviceSelect::If(nullptr, bytes, thrust::counting_iterator<uint32_t>(0),
                        static_cast<uint32_t*>(nullptr),
                        static_cast<unsigned long long*>(nullptr), static_cast<int>(n),
                        AtLeast{nullptr, 0});
  return bytes;
}

cudaError_t CollectAtLeast(const float* v, size_t n, uint32_t threshold, uint32_t* ids,
                           unsigned long long* count, void* temp, size_t temp_bytes,
                           cudaStream_t stream) {
  return cub::DeviceSelect::If(temp, temp_bytes, thrust::counting_iterator<uint32_t>(0), ids,
                               count, static_cast<int>(n), AtLeast{v, threshold}, stream);
}

cudaError_t TakeValues(float* residual, float* velocity, const uint32_t* ids, size_t count,
                       bool half, void* out, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  TakeValuesKernel<<<Blocks(count), kThreads, 0, stream>>>(residual, velocity, ids, count, half,
                                                           out);
  return cudaGetLastError();
}

cudaError_t ChunkSquaredNorms(const float* v, size_t n, uint32_t chunk, float* norms,
                              cudaStream_t stream) {
  const size_t chunks = (n + chunk - 1) / chunk;
  if (chunks == 0) return cudaSuccess;
  ChunkNormsKernel<<<static_cast<unsigned int>(chunks), kThreads, 0, stream>>>(v, n, chunk, norms);
  return cudaGetLastError();
}

cudaError_t TakeChunks(float* residual, float* velocity, const uint32_t* ids, size_t count,
                       uint32_t chunk, size_t n, bool half, void* out, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  TakeChunksKernel<<<Blocks(count * chunk), kThreads, 0, stream>>>(residual, velocity, ids,
                                                                   count, chunk, n, half, out);
  return cudaGetLastError();
}

}  // namespace r2sp::codec::cuda
