// The CUDA half of CreateNetwork (models/backend.h), private to //models:backend: defined by
// backend_cuda.cc in builds with CUDA and by backend_no_cuda.cc in the others.
#ifndef R2SP_MODELS_BACKEND_CUDA_H_
#define R2SP_MODELS_BACKEND_CUDA_H_

#include <memory>

#include "absl/status/statusor.h"
#include "models/backend.h"

namespace r2sp::models {

// CreateNetwork for options.device == "cuda".
absl::StatusOr<std::unique_ptr<Network>> CreateCudaBackend(const Graph& graph,
                                                           const BackendOptions& options);

}  // namespace r2sp::models

#endif  // R2SP_MODELS_BACKEND_CUDA_H_
