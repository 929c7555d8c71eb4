// The CPU backend (oneDNN): execution plans per batch size, activations in oneDNN's blocked
// layouts, parameters and gradients in the parameter servers' flat arrays. Callers outside
// //models use CreateNetwork (models/backend.h) with device "cpu".
#ifndef R2SP_MODELS_CPU_CPU_NETWORK_H_
#define R2SP_MODELS_CPU_CPU_NETWORK_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "models/graph.h"
#include "models/network.h"

namespace r2sp::models {

struct CpuOptions {
  int threads = 0;    // oneDNN/OpenMP threads; 0 keeps the default
  uint64_t seed = 1;  // dropout masks
};

// InvalidArgument for a graph without an input node and a layer; Internal for oneDNN errors.
absl::StatusOr<std::unique_ptr<Network>> CreateCpuNetwork(const Graph& graph,
                                                          const CpuOptions& options);

}  // namespace r2sp::models

#endif  // R2SP_MODELS_CPU_CPU_NETWORK_H_
