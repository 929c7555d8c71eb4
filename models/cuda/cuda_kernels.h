// Host-callable launchers for the CUDA backend's own kernels (everything else is cuDNN or
// cuBLAS). Plain C++: no CUDA syntax, so host code compiled by g++ can include it.
#ifndef R2SP_MODELS_CUDA_CUDA_KERNELS_H_
#define R2SP_MODELS_CUDA_CUDA_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace r2sp::models::cuda {

// Per sample: loss[i] = -log softmax(logits_i)[label_i], correct[i] = argmax == label,
// grad (if not null) = (softmax - onehot) / n. A label outside [0, classes) sets loss[i] = NaN.
cudaError_t SoftmaxCrossEntropy(const float* logits, const int32_t* labels, int n, int classes,
                                float* loss, int32_t* correct, float* grad, cudaStream_t stream);

// y = x * mask, mask = keep ? 1 / (1 - p) : 0, keep = the same hash as models::DropoutKeep.
cudaError_t DropoutForward(const float* x, float* y, float* mask, int64_t count, uint64_t seed,
                           int64_t step, int node, float p, cudaStream_t stream);

// out = a * b + beta * out (elementwise).
cudaError_t MultiplyAccumulate(const float* a, const float* b, float* out, int64_t count,
                               float beta, cudaStream_t stream);

}  // namespace r2sp::models::cuda

#endif  // R2SP_MODELS_CUDA_CUDA_KERNELS_H_
