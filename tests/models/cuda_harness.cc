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
  if (h_.relu) cudnnDestroyActivationDescriptor(h_.relu);
  if (h_.add_op) cudnnDestroyOpTensorDescriptor(h_.add_op);
  if (h_.cublas) cublasDestroy(h_.cublas);
  if (h_.cudnn) cudnnDestroy(h_.cudnn);
  if (h_.stream) cudaStreamDestroy(h_.stream);
}

absl::Status CudaHarness::Init(const std::vector<float>& params, int batch) {
  CUDA_OK(cudaStreamCreateWithFlags(&h_.stream, cudaStreamNonBlocking));
  CUDNN_OK(cudnnCreate(&h_.cudnn));
  CUDNN_OK(cudnnSetStream(h_.cudnn, h_.stream));
  CUBLAS_OK(cublasCreate(&h_.cublas));
  CUBLAS_OK(cublasSetStream(h_.cublas, h_.stream));
  CUDNN_OK(cudnnCreateActivationDescriptor(&h_.relu));
  CUDNN_OK(
      cudnnSetActivationDescriptor(h_.relu, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  CUDNN_OK(cudnnCreateOpTensorDescriptor(&h_.add_op));
  CUDNN_OK(cudnnSetOpTensorDescriptor(h_.add_op, CUDNN_OP_TENSOR_ADD, CUDNN_DATA_FLOAT,
                                      CUDNN_NOT_PROPAGATE_NAN));
  int64_t offset = 0;
  for (const Param& p : graph_.params) {
    device_.offsets.push_back(offset);
    offset += p.size();
  }
  R2SP_RETURN_IF_ERROR(device_.params.Allocate(offset));
  R2SP_RETURN_IF_ERROR(device_.grads.Allocate(offset));
  CUDA_OK(cudaMemcpy(device_.params.ptr, params.data(), params.size() * sizeof(float),
                     cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(device_.grads.ptr, 0, std::max<int64_t>(offset, 1) * sizeof(float)));
  running_.mean.resize(graph_.nodes.size());
  running_.var.resize(graph_.nodes.size());
  for (size_t i = 0; i < graph_.nodes.size(); ++i) {
    if (graph_.nodes[i].op != Op::kBatchNorm) continue;
    const int c = graph_.nodes[i].out.c;
    R2SP_RETURN_IF_ERROR(running_.mean[i].Allocate(c));
    R2SP_RETURN_IF_ERROR(running_.var[i].Allocate(c));
    const std::vector<float> zeros(c, 0.0f), ones(c, 1.0f);
    CUDA_OK(
        cudaMemcpy(running_.mean[i].ptr, zeros.data(), c * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_OK(
        cudaMemcpy(running_.var[i].ptr, ones.data(), c * sizeof(float), cudaMemcpyHostToDevice));
  }
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
