// The CUDA backend (cuDNN for convolution, pooling, activation and batch norm; cuBLAS for the
// fully connected layers; own kernels for the loss and dropout). Built only with CUDA
// (//models:cuda_network, tagged gpu). Parameters and gradients stay in the flat host arrays
// the parameter servers use; each step copies parameters in and gradients out, layer by layer
// on a second stream overlapping compute (copy_pipeline.h); pin those arrays with
// Network::PinHostMemory for full-speed asynchronous copies.
#ifndef R2SP_MODELS_CUDA_CUDA_NETWORK_H_
#define R2SP_MODELS_CUDA_CUDA_NETWORK_H_

#include <memory>

#include "absl/status/statusor.h"
#include "models/network.h"

namespace r2sp::models {

struct CudaOptions {
  int device = 0;
  uint64_t seed = 1;  // dropout masks (identical to the CPU backend's for the same seed)
  // Let cuDNN use TF32 tensor cores for convolutions (PyTorch's default) and its fastest
  // algorithms; false for full-fp32 direct summation (no TF32, FFT or Winograd), e.g. to
  // compare with the CPU backend element by element (docs/ARCHITECTURE.md, GPU numerics).
  bool allow_tf32 = true;
};

// Number of visible CUDA devices (0 when there is no driver or no GPU).
int CudaDeviceCount();

absl::StatusOr<std::unique_ptr<Network>> CreateCudaNetwork(const Graph& graph,
                                                           const CudaOptions& options);

}  // namespace r2sp::models

#endif  // R2SP_MODELS_CUDA_CUDA_NETWORK_H_
