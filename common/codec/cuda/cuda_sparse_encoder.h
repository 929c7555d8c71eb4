// SparseEncoder (../sparse_encoder.h) for gradients on the GPU: the residual (and DGC's
// velocity) live on the device, the passes over them run as kernels (codec_kernels.h), and the
// choices between passes are the CPU encoder's own (TopKThresholdSearch, ChunkCredit,
// SelectChunksByNorm), so both pick the same values from the same sample. What travels (ids and
// values) comes back to the host for the wire. Top-k's exact fallback copies the residual to the
// host (it is rare: the sampled threshold failed its refinements).
#ifndef R2SP_COMMON_CODEC_CUDA_CUDA_SPARSE_ENCODER_H_
#define R2SP_COMMON_CODEC_CUDA_CUDA_SPARSE_ENCODER_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/codec/csc.h"
#include "common/codec/sparse_encoder.h"

namespace r2sp::codec::cuda {

// Not thread-safe; all work runs on `stream`, and Encode returns once the host has its output.
class CudaSparseEncoder {
 public:
  CudaSparseEncoder(size_t num_elements, const SparseEncoderOptions& options,
                    cudaStream_t stream);
  ~CudaSparseEncoder();
  CudaSparseEncoder(const CudaSparseEncoder&) = delete;
  CudaSparseEncoder& operator=(const CudaSparseEncoder&) = delete;

  // Allocates the device buffers (call once before Encode).
  absl::Status Init();
  // SparseEncoder::Encode with `grad` in device memory.
  absl::Status Encode(const float* grad, double density, SparseGradient* out);
  // The residual, copied to the host (tests).
  absl::StatusOr<std::vector<float>> Residual() const;

 private:
  absl::Status SelectTopK(double density, SparseGradient* out);
  // How many residual values' keys are at or above `threshold` (a pass on the device).
  absl::StatusOr<size_t> Count(uint32_t threshold);
  // Collects them (ids, increasing) and takes their values.
  absl::Status CollectAndTake(uint32_t threshold, size_t count, SparseGradient* out);
  absl::Status SelectChunks(double density, SparseGradient* out);
  // Copies the `count` selected ids (on the device) to out->ids and their values out.
  absl::Status TakeSelected(size_t count, bool chunks, SparseGradient* out);

  const size_t n_;
  const SparseEncoderOptions options_;
  const cudaStream_t stream_;
  float* residual_ = nullptr;
  float* velocity_ = nullptr;    // momentum correction only
  uint32_t* ids_ = nullptr;      // n entries: room for every selection
  void* values_ = nullptr;       // n fp32 values
  uint32_t* sample_ = nullptr;   // top-k's sampled keys
  unsigned long long* count_ = nullptr;
  void* temp_ = nullptr;         // CollectAtLeast's scratch
  size_t temp_bytes_ = 0;
  float* norms_ = nullptr;       // csc's chunk norms
  ChunkCredit chunk_credit_;
  uint32_t topk_threshold_ = 0;  // the last push's cut, tried first (as SparseEncoder does)
};

}  // namespace r2sp::codec::cuda

#endif  // R2SP_COMMON_CODEC_CUDA_CUDA_SPARSE_ENCODER_H_
