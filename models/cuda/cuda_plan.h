// The CUDA backend's per-batch plan — device buffers, tensor descriptors and the chosen
// convolution algorithms of every node — with BuildPlan, which fills it, and what the forward
// and backward passes (cuda_forward.h, cuda_backward.h) share: the library handles, the
// device copies of the parameters and gradients, batch norm's running statistics, and a
// node's view of a plan (NodeArgs). Built only with CUDA. Not part of the models API:
// include models/cuda/cuda_network.h.
#ifndef R2SP_MODELS_CUDA_CUDA_PLAN_H_
#define R2SP_MODELS_CUDA_CUDA_PLAN_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "models/cuda/cuda_status.h"
#include "models/graph.h"

namespace r2sp::models::cuda_internal {

// A device allocation of floats (or ints), freed with the plan.
template <typename T>
struct DeviceArray {
  T* ptr = nullptr;
  size_t count = 0;
  absl::Status Allocate(size_t n) {
    count = n;
    return CudaStatus(
        cudaMalloc(reinterpret_cast<void**>(&ptr), std::max<size_t>(n, 1) * sizeof(T)),
        "cudaMalloc", __FILE__, __LINE__);
  }
  ~DeviceArray() {
    if (ptr != nullptr) cudaFree(ptr);
  }
};

// Page-locked host memory (cudaMallocHost), for the small per-step results read back.
template <typename T>
struct PinnedArray {
  T* ptr = nullptr;
  absl::Status Allocate(size_t n) {
    const size_t bytes = std::max<size_t>(n, 1) * sizeof(T);
    return CudaStatus(cudaMallocHost(reinterpret_cast<void**>(&ptr), bytes), "cudaMallocHost",
                      __FILE__, __LINE__);
  }
  ~PinnedArray() {
    if (ptr != nullptr) cudaFreeHost(ptr);
  }
};

struct NodeGpu {
  cudnnTensorDescriptor_t out_desc = nullptr;
  DeviceArray<float> out, diff;
  // Convolution.
  cudnnFilterDescriptor_t filter = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnTensorDescriptor_t bias_desc = nullptr;
  cudnnConvolutionFwdAlgo_t fwd_algo{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo{};
  // Pooling, activation, batch norm, add.
  cudnnPoolingDescriptor_t pool = nullptr;
  cudnnTensorDescriptor_t bn_desc = nullptr;
  DeviceArray<float> saved_mean, saved_inv_var, mask;
  bool first_diff_write[2] = {true, true};  // per input: does backward initialise its gradient?
};

struct PlanGpu {
  int batch = 0;
  std::vector<NodeGpu> nodes;
  DeviceArray<float> images, loss, workspace;
  DeviceArray<int32_t> labels, correct;
  PinnedArray<float> host_loss;  // per sample, read back after the step
  PinnedArray<int32_t> host_correct;
  size_t workspace_bytes = 0;
  ~PlanGpu() {
    for (NodeGpu& n : nodes) {
      if (n.out_desc) cudnnDestroyTensorDescriptor(n.out_desc);
      if (n.filter) cudnnDestroyFilterDescriptor(n.filter);
      if (n.conv) cudnnDestroyConvolutionDescriptor(n.conv);
      if (n.bias_desc) cudnnDestroyTensorDescriptor(n.bias_desc);
      if (n.pool) cudnnDestroyPoolingDescriptor(n.pool);
      if (n.bn_desc) cudnnDestroyTensorDescriptor(n.bn_desc);
    }
  }
};

// The library handles every pass of one network uses: made by Create (on the current device),
// destroyed by Destroy or with this.
struct CudaHandles {
  CudaHandles() = default;
  CudaHandles(const CudaHandles&) = delete;
  CudaHandles& operator=(const CudaHandles&) = delete;
  ~CudaHandles() { Destroy(); }
  // A non-blocking stream, cuDNN and cuBLAS on it, the relu and add descriptors.
  absl::Status Create();
  // Destroys what Create made (what it made before failing, too); then again a no-op.
  void Destroy();

  cudaStream_t stream = nullptr;  // compute
  cudnnHandle_t cudnn = nullptr;
  cublasHandle_t cublas = nullptr;
  cudnnActivationDescriptor_t relu = nullptr;
  cudnnOpTensorDescriptor_t add_op = nullptr;
};

// The device copies of the flat parameter and gradient arrays, and where each parameter starts.
struct DeviceParams {
  // Lays `graph`'s parameters out one after another and allocates both arrays (uninitialised).
  absl::Status Allocate(const Graph& graph);

  DeviceArray<float> params, grads;
  std::vector<int64_t> offsets;
  float* Param(int index) const { return params.ptr + offsets[index]; }
  float* Grad(int index) const { return grads.ptr + offsets[index]; }
};

// Batch norm's running mean and variance on the device, one array per node (empty but for
// batch-norm nodes).
struct RunningStatistics {
  // Allocates the batch-norm nodes' arrays of `graph`: mean 0, variance 1.
  absl::Status Allocate(const Graph& graph);

  std::vector<DeviceArray<float>> mean, var;
};

// Node `index` of a plan as a pass sees it.
struct NodeArgs {
  int index;
  const Node& node;
  NodeGpu& g;
  int in_index;    // the first input
  NodeGpu& in;     // its buffers
  const float* x;  // its output (the images when it is the input node)
  bool need_dx() const { return in_index > 0; }  // the images need no gradient
};
NodeArgs ArgsFor(const Graph& graph, PlanGpu& plan, int i);

// Allocates and describes `plan` for `graph` at `batch`, choosing each convolution's
// algorithms with `cudnn` (without `allow_tf32`: only full-fp32 direct ones). The error of the
// first failed CUDA or cuDNN call, or FailedPrecondition when cuDNN offers no usable algorithm.
absl::Status BuildPlan(const Graph& graph, cudnnHandle_t cudnn, bool allow_tf32, int batch,
                       PlanGpu& plan);

}  // namespace r2sp::models::cuda_internal

#endif  // R2SP_MODELS_CUDA_CUDA_PLAN_H_
