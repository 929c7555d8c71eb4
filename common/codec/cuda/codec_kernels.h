// The wire encoders' GPU kernels, for gradients that live on the device: fp16
// conversion and the pieces of the error-feedback top-k and csc encoders. Each function enqueues
// work on `stream` and returns the launch's error; pointers are device memory unless named
// `host_`. CudaSparseEncoder (cuda_sparse_encoder.h) puts them together; the choices between
// passes (thresholds, chunk ranking) stay on the host, shared with the CPU encoder.
#ifndef R2SP_COMMON_CODEC_CUDA_CODEC_KERNELS_H_
#define R2SP_COMMON_CODEC_CUDA_CODEC_KERNELS_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace r2sp::codec::cuda {

// IEEE binary16 with round-to-nearest-even (__float2half_rn): bit-identical to the CPU codec,
// NaN, Inf, subnormals and signed zeros included.
cudaError_t EncodeFp16(const float* in, size_t n, uint16_t* out, cudaStream_t stream);
cudaError_t DecodeFp16(const uint16_t* in, size_t n, float* out, cudaStream_t stream);

// How a gradient enters the residual: replace it (no error feedback), add to it (error
// feedback), or through DGC's velocity (u = mu * u + g; residual += u).
enum class Accumulate { kCopy, kAdd, kVelocity };
cudaError_t AccumulateGradient(Accumulate how, float mu, const float* grad, float* velocity,
                               float* residual, size_t n, cudaStream_t stream);

// keys[j] = |v[j * stride + stride / 2]|'s bits, for j < m (the top-k threshold's sample).
cudaError_t GatherKeys(const float* v, size_t stride, size_t m, uint32_t* keys,
                       cudaStream_t stream);
// *count = how many |v[i]|'s bits are >= threshold. REQUIRES: n < 2^31.
cudaError_t CountAtLeast(const float* v, size_t n, uint32_t threshold,
                         unsigned long long* count, cudaStream_t stream);
// The indices of those values, increasing, into ids (room for all of them); *count as above.
// `temp` holds CollectAtLeastTempBytes(n) bytes.
size_t CollectAtLeastTempBytes(size_t n);
cudaError_t CollectAtLeast(const float* v, size_t n, uint32_t threshold, uint32_t* ids,
                           unsigned long long* count, void* temp, size_t temp_bytes,
                           cudaStream_t stream);

// Moves residual[ids[j]] to out[j] (fp32, or fp16 with the rounding error left in the
// residual) and clears velocity[ids[j]] when velocity is not null.
cudaError_t TakeValues(float* residual, float* velocity, const uint32_t* ids, size_t count,
                       bool half, void* out, cudaStream_t stream);

// norms[c] = the squared L2 norm of chunk c of v (chunks of `chunk` values, the last shorter).
cudaError_t ChunkSquaredNorms(const float* v, size_t n, uint32_t chunk, float* norms,
                              cudaStream_t stream);
// TakeValues for whole chunks: chunk ids[j]'s values go to out from j * chunk on.
cudaError_t TakeChunks(float* residual, float* velocity, const uint32_t* ids, size_t count,
                       uint32_t chunk, size_t n, bool half, void* out, cudaStream_t stream);

}  // namespace r2sp::codec::cuda

#endif  // R2SP_COMMON_CODEC_CUDA_CODEC_KERNELS_H_
