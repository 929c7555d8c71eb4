// See cuda_harness.h.
#include "tests/models/cuda_harness.h"

#include <utility>

#include "common/status_macros.h"
#include "models/cuda/cuda_status.h"

namespace r2sp::models::cuda_internal::testing {

bool HaveGpu() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return count > 0;
}

CudaHarness::CudaHarness(Graph graph, uint64_t seed)
    : graph_(std::move(graph)),
      forward_(graph_, h_, device_, running_, seed, step_),
      backward_(graph_, h_, device_) {}

CudaHarness::~CudaHarness() {
  if (h_.stream) cudaStreamSynchronize(h_.stream);
  h_.Destroy();
}

absl::Status CudaHarness::Init(const std::vector<float>& params, int batch) {
  R2SP_RETURN_IF_ERROR(h_.Create());
  R2SP_RETURN_IF_ERROR(device_.Allocate(graph_));
  CUDA_OK(cudaMemcpy(device_.params.ptr, params.data(), params.size() * sizeof(float),
                     cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(device_.grads.ptr, 0,
                     std::max<size_t>(device_.grads.count, 1) * sizeof(float)));
  R2SP_RETURN_IF_ERROR(running_.Allocate(graph_));
  return BuildPlan(graph_, h_.cudnn, /*allow_tf32=*/false, batch, plan_);
}

absl::Status CudaHarness::Forward(const std::vector<float>& images, bool training) {
  CUDA_OK(cudaMemcpyAsync(plan_.images.ptr, images.data(), images.size() * sizeof(float),
                          cudaMemcpyHostToDevice, h_.stream));
  for (int i = 1; i < static_cast<int>(graph_.nodes.size()); ++i) {
    R2SP_RETURN_IF_ERROR(forward_.Queue(plan_, i, training));
  }
  return absl::OkStatus();
}

absl::Status CudaHarness::Backward(const std::vector<float>& logits_diff) {
  CUDA_OK(cudaMemcpyAsync(plan_.nodes.back().diff.ptr, logits_diff.data(),
                          logits_diff.size() * sizeof(float), cudaMemcpyHostToDevice, h_.stream));
  for (int i = static_cast<int>(graph_.nodes.size()) - 1; i > 0; --i) {
    R2SP_RETURN_IF_ERROR(backward_.Queue(plan_, i));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> CudaHarness::Read(const float* device, size_t count) {
  CUDA_OK(cudaStreamSynchronize(h_.stream));
  std::vector<float> host(count);
  CUDA_OK(cudaMemcpy(host.data(), device, count * sizeof(float), cudaMemcpyDeviceToHost));
  return host;
}

}  // namespace r2sp::models::cuda_internal::testing
