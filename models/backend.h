// The one way to get a Network: CreateNetwork picks the backend (oneDNN on the CPU, or cuDNN
// and cuBLAS on a GPU) from BackendOptions::device. Whether the CUDA backend is linked in is
// decided by the build (bazel build --config=cuda), not by #ifdefs in the callers.
#ifndef R2SP_MODELS_BACKEND_H_
#define R2SP_MODELS_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "models/graph.h"
#include "models/network.h"

namespace r2sp::models {

struct BackendOptions {
  // "cpu" (oneDNN) or "cuda" (cuDNN/cuBLAS; needs a binary built with --config=cuda).
  std::string device = "cpu";
  // cpu: oneDNN/OpenMP threads; 0 keeps the default. REQUIRES: >= 0.
  int threads = 0;
  // cuda: the CUDA device index. REQUIRES: >= 0.
  int gpu = 0;
  // Dropout masks; both backends draw identical masks from the same seed.
  uint64_t seed = 1;
};

// Whether this binary was linked with the CUDA backend (it may still find no GPU).
bool CudaAvailableInBuild();

// A network executing `graph` on options.device. InvalidArgument for an unknown device,
// FailedPrecondition for "cuda" in a binary built without CUDA, Unavailable when no GPU is
// visible, or the backend's own error.
absl::StatusOr<std::unique_ptr<Network>> CreateNetwork(const Graph& graph,
                                                       const BackendOptions& options);

}  // namespace r2sp::models

#endif  // R2SP_MODELS_BACKEND_H_
