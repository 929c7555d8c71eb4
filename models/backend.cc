// See backend.h. The CUDA half is backend_cuda.cc or backend_no_cuda.cc, chosen in BUILD.
#include "models/backend.h"

#include "absl/strings/str_cat.h"
#include "models/backend_cuda.h"
#include "models/cpu/cpu_network.h"

namespace r2sp::models {

absl::StatusOr<std::unique_ptr<Network>> CreateNetwork(const Graph& graph,
                                                       const BackendOptions& options) {
  if (options.device == "cpu") {
    CpuOptions cpu;
    cpu.threads = options.threads;
    cpu.seed = options.seed;
    return CreateCpuNetwork(graph, cpu);
  }
  if (options.device == "cuda") return CreateCudaBackend(graph, options);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown device \"", options.device, "\" (cpu or cuda)"));
}

}  // namespace r2sp::models
