// The CUDA half of CreateNetwork in builds with CUDA (bazel build --config=cuda).
#include "models/backend_cuda.h"
#include "models/cuda/cuda_network.h"

namespace r2sp::models {

bool CudaAvailableInBuild() { return true; }

absl::StatusOr<std::unique_ptr<Network>> CreateCudaBackend(const Graph& graph,
                                                           const BackendOptions& options) {
  CudaOptions cuda;
  cuda.device = options.gpu;
  cuda.seed = options.seed;
  return CreateCudaNetwork(graph, cuda);
}

}  // namespace r2sp::models
