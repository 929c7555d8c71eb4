// See cuda_sparse_encoder.h.
#include "common/codec/cuda/cuda_sparse_encoder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/codec/cuda/codec_kernels.h"
#include "common/codec/topk.h"
#include "common/status_macros.h"

namespace r2sp::codec::cuda {
namespace {

absl::Status Check(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(error)));
}

}  // namespace

CudaSparseEncoder::CudaSparseEncoder(size_t num_elements, const SparseEncoderOptions& options,
                                     cudaStream_t stream)
    : n_(num_elements), options_(options), stream_(stream) {}

CudaSparseEncoder::~CudaSparseEncoder() {
  for (void* p : {static_cast<void*>(residual_), static_cast<void*>(velocity_),
                  static_cast<void*>(ids_), values_, static_cast<void*>(sample_),
                  static_cast<void*>(count_), temp_, static_cast<void*>(norms_)}) {
    if (p != nullptr) cudaFree(p);
  }
}

absl::Status CudaSparseEncoder::Init() {
  if (!options_.spec.sparse()) return absl::InvalidArgumentError("not a sparse codec");
  const size_t bytes = n_ * sizeof(float);
  R2SP_RETURN_IF_ERROR(Check(cudaMalloc(&residual_, bytes), "residual"));
  R2SP_RETURN_IF_ERROR(Check(cudaMemsetAsync(residual_, 0, bytes, stream_), "residual"));
  if (options_.momentum_correction > 0.0f) {
    R2SP_RETURN_IF_ERROR(Check(cudaMalloc(&velocity_, bytes), "velocity"));
    R2SP_RETURN_IF_ERROR(Check(cudaMemsetAsync(velocity_, 0, bytes, stream_), "velocity"));
  }
  R2SP_RETURN_IF_ERROR(Check(cudaMalloc(&ids_, n_ * sizeof(uint32_t)), "ids"));
  R2SP_RETURN_IF_ERROR(Check(cudaMalloc(&values_, bytes), "values"));
  R2SP_RETURN_IF_ERROR(Check(cudaMalloc(&count_, sizeof(*count_)), "count"));
  if (options_.spec.codec == proto::TOPK) {
    const size_t samples = TopKThresholdSearch::MaxSampleSize(n_, options_.topk);
    R2SP_RETURN_IF_ERROR(Check(cudaMalloc(&sample_, samples * sizeof(uint32_t)), "sample"));
    temp_bytes_ = CollectAtLeastTempBytes(n_);
    R2SP_RETURN_IF_ERROR(Check(cudaMalloc(&temp_, temp_bytes_ + 1), "temp"));
  } else {
    const size_t chunks = NumChunks(n_, options_.spec.chunk_elements);
    R2SP_RETURN_IF_ERROR(Check(cudaMalloc(&norms_, (chunks + 1) * sizeof(float)), "norms"));
  }
  return Check(cudaStreamSynchronize(stream_), "init");
}

absl::Status CudaSparseEncoder::Encode(const float* grad, double density, SparseGradient* out) {
  const Accumulate how = velocity_ != nullptr          ? Accumulate::kVelocity
                         : options_.error_feedback ? Accumulate::kAdd
                                                   : Accumulate::kCopy;
  R2SP_RETURN_IF_ERROR(Check(AccumulateGradient(how, options_.momentum_correction, grad,
                                                velocity_, residual_, n_, stream_),
                             "accumulate"));
  out->topk = TopKStats();
  if (options_.spec.codec == proto::CSC) {
    R2SP_RETURN_IF_ERROR(SelectChunks(density, out));
  } else {
    R2SP_RETURN_IF_ERROR(SelectTopK(density, out));
  }
  if (!options_.error_feedback && velocity_ == nullptr) {
    R2SP_RETURN_IF_ERROR(
        Check(cudaMemsetAsync(residual_, 0, n_ * sizeof(float), stream_), "clear residual"));
  }
  return Check(cudaStreamSynchronize(stream_), "encode");
}

absl::StatusOr<size_t> CudaSparseEncoder::Count(uint32_t threshold) {
  unsigned long long count = n_;
  if (threshold == 0) return count;  // as on the CPU: a zero threshold clears everything
  R2SP_RETURN_IF_ERROR(Check(CountAtLeast(residual_, n_, threshold, count_, stream_), "count"));
  R2SP_RETURN_IF_ERROR(Check(
      cudaMemcpyAsync(&count, count_, sizeof(count), cudaMemcpyDeviceToHost, stream_),
      "count copy"));
  R2SP_RETURN_IF_ERROR(Check(cudaStreamSynchronize(stream_), "count"));
  return count;
}

absl::Status CudaSparseEncoder::CollectAndTake(uint32_t threshold, size_t count,
                                               SparseGradient* out) {
  R2SP_RETURN_IF_ERROR(Check(
      CollectAtLeast(residual_, n_, threshold, ids_, count_, temp_, temp_bytes_, stream_),
      "collect"));
  topk_threshold_ = threshold;
  return TakeSelected(count, /*chunks=*/false, out);
}

// SparseEncoder's choices: the last push's threshold first, then the sampled search, then
// exact selection.
absl::Status CudaSparseEncoder::SelectTopK(double density, SparseGradient* out) {
  const size_t k = TopKCount(n_, density);
  TopKThresholdSearch search(n_, k, options_.topk);
  if (!options_.spec.exact && !search.exact()) {
    if (topk_threshold_ != 0) {
      R2SP_ASSIGN_OR_RETURN(const size_t count, Count(topk_threshold_));
      ++out->topk.passes;
      if (search.within(count)) return CollectAndTake(topk_threshold_, count, out);
    }
    const size_t m = search.sample_size();
    R2SP_RETURN_IF_ERROR(
        Check(GatherKeys(residual_, search.stride(), m, sample_, stream_), "sample"));
    std::vector<uint32_t> keys(m);
    R2SP_RETURN_IF_ERROR(Check(cudaMemcpyAsync(keys.data(), sample_, m * sizeof(uint32_t),
                                               cudaMemcpyDeviceToHost, stream_),
                               "sample copy"));
    R2SP_RETURN_IF_ERROR(Check(cudaStreamSynchronize(stream_), "sample"));
    search.SetSample(std::move(keys));
    while (!search.exhausted()) {
      const uint32_t threshold = search.threshold();
      R2SP_ASSIGN_OR_RETURN(const size_t count, Count(threshold));
      ++out->topk.passes;
      // (A zero threshold takes every value, as on the CPU.)
      if (search.Accept(count)) return CollectAndTake(threshold, count, out);
    }
  }
  // Exact selection on the host, from a copy of the residual.
  R2SP_ASSIGN_OR_RETURN(const std::vector<float> residual, Residual());
  SelectTopKExact(residual.data(), n_, k, &out->ids, &topk_threshold_);
  out->topk.exact = true;
  if (!options_.spec.exact) ++out->topk.passes;
  R2SP_RETURN_IF_ERROR(Check(cudaMemcpyAsync(ids_, out->ids.data(),
                                             out->ids.size() * sizeof(uint32_t),
                                             cudaMemcpyHostToDevice, stream_),
                             "ids copy"));
  return TakeSelected(out->ids.size(), /*chunks=*/false, out);
}

absl::Status CudaSparseEncoder::SelectChunks(double density, SparseGradient* out) {
  const uint32_t chunk = options_.spec.chunk_elements;
  const size_t chunks = NumChunks(n_, chunk);
  const size_t count = chunk_credit_.Take(density, chunks);
  std::vector<float> norms(chunks);
  R2SP_RETURN_IF_ERROR(Check(ChunkSquaredNorms(residual_, n_, chunk, norms_, stream_), "norms"));
  R2SP_RETURN_IF_ERROR(Check(cudaMemcpyAsync(norms.data(), norms_, chunks * sizeof(float),
                                             cudaMemcpyDeviceToHost, stream_),
                             "norms copy"));
  R2SP_RETURN_IF_ERROR(Check(cudaStreamSynchronize(stream_), "norms"));
  SelectChunksByNorm(norms, count, &out->ids);
  R2SP_RETURN_IF_ERROR(Check(cudaMemcpyAsync(ids_, out->ids.data(),
                                             out->ids.size() * sizeof(uint32_t),
                                             cudaMemcpyHostToDevice, stream_),
                             "ids copy"));
  return TakeSelected(out->ids.size(), /*chunks=*/true, out);
}

absl::Status CudaSparseEncoder::TakeSelected(size_t count, bool chunks, SparseGradient* out) {
  const bool half = options_.spec.fp16_values;
  const uint32_t chunk = options_.spec.chunk_elements;
  size_t values = count;
  if (chunks) {
    R2SP_RETURN_IF_ERROR(Check(TakeChunks(residual_, velocity_, ids_, count, chunk, n_, half,
                                          values_, stream_),
                               "take chunks"));
    values = 0;
    for (uint32_t id : out->ids) values += ChunkLength(n_, chunk, id);
  } else {
    R2SP_RETURN_IF_ERROR(
        Check(TakeValues(residual_, velocity_, ids_, count, half, values_, stream_), "take"));
    out->ids.resize(count);
    R2SP_RETURN_IF_ERROR(Check(cudaMemcpyAsync(out->ids.data(), ids_, count * sizeof(uint32_t),
                                               cudaMemcpyDeviceToHost, stream_),
                               "ids copy"));
  }
  out->values.clear();
  out->half_values.clear();
  void* host = nullptr;
  size_t bytes = 0;
  if (half) {
    out->half_values.resize(values);
    host = out->half_values.data();
    bytes = values * sizeof(uint16_t);
  } else {
    out->values.resize(values);
    host = out->values.data();
    bytes = values * sizeof(float);
  }
  // Chunk values sit at j * chunk on the device; only the last chunk can be short, so the
  // packed layout is the same.
  return Check(cudaMemcpyAsync(host, values_, bytes, cudaMemcpyDeviceToHost, stream_),
               "values copy");
}

absl::StatusOr<std::vector<float>> CudaSparseEncoder::Residual() const {
  std::vector<float> residual(n_);
  R2SP_RETURN_IF_ERROR(Check(cudaMemcpyAsync(residual.data(), residual_, n_ * sizeof(float),
                                             cudaMemcpyDeviceToHost, stream_),
                             "residual copy"));
  R2SP_RETURN_IF_ERROR(Check(cudaStreamSynchronize(stream_), "residual"));
  return residual;
}

}  // namespace r2sp::codec::cuda
