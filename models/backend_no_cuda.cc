// The CUDA half of CreateNetwork in builds without CUDA: a clear error instead of a GPU.
#include "models/backend_cuda.h"

namespace r2sp::models {

bool CudaAvailableInBuild() { return false; }

absl::StatusOr<std::unique_ptr<Network>> CreateCudaBackend(const Graph&,
                                                           const BackendOptions&) {
  return absl::FailedPreconditionError(
      "device \"cuda\": this binary was built without CUDA (bazel build --config=cuda)");
}

}  // namespace r2sp::models
