// Errors from CUDA, cuDNN and cuBLAS as absl::Status naming the failed call, file and line, and
// the macros that return them from the enclosing function (the shared R2SP_RETURN_IF_ERROR).
#ifndef R2SP_MODELS_CUDA_CUDA_STATUS_H_
#define R2SP_MODELS_CUDA_CUDA_STATUS_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace r2sp::models::cuda_internal {

inline absl::Status CudaStatus(cudaError_t e, const char* what, const char* file, int line) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("CUDA error at ", file, ":", line, " (", what,
                                          "): ", cudaGetErrorString(e)));
}
inline absl::Status CudnnStatus(cudnnStatus_t e, const char* what, const char* file, int line) {
  if (e == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("cuDNN error at ", file, ":", line, " (", what,
                                          "): ", cudnnGetErrorString(e)));
}
inline absl::Status CublasStatus(cublasStatus_t e, const char* what, const char* file, int line) {
  if (e == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("cuBLAS error at ", file, ":", line, " (", what,
                                          "): status ", static_cast<int>(e)));
}

// Return the failed call's error (naming the call, file and line) from the enclosing function.
#define CUDA_OK(expr) R2SP_RETURN_IF_ERROR(CudaStatus((expr), #expr, __FILE__, __LINE__))
#define CUDNN_OK(expr) R2SP_RETURN_IF_ERROR(CudnnStatus((expr), #expr, __FILE__, __LINE__))
#define CUBLAS_OK(expr) R2SP_RETURN_IF_ERROR(CublasStatus((expr), #expr, __FILE__, __LINE__))

}  // namespace r2sp::models::cuda_internal

#endif  // R2SP_MODELS_CUDA_CUDA_STATUS_H_
