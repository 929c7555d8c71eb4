// See sparse_encoder.h.
#include "common/codec/sparse_encoder.h"

#include <algorithm>
#include <cstring>

#include "common/codec/csc.h"
#include "common/codec/fp16.h"
#include "common/target_clones.h"
#include "glog/logging.h"

namespace r2sp::codec {
namespace {

R2SP_TARGET_CLONES
void AddInto(const float* __restrict g, float* __restrict acc, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] += g[i];
}

// u = mu * u + g; acc += u.
R2SP_TARGET_CLONES
void AccumulateVelocity(float mu, const float* __restrict g, float* __restrict u,
                        float* __restrict acc, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    u[i] = mu * u[i] + g[i];
    acc[i] += u[i];
  }
}

}  // namespace

SparseEncoder::SparseEncoder(size_t num_elements, const SparseEncoderOptions& options)
    : n_(num_elements), options_(options), residual_(num_elements, 0.0f) {
  CHECK(options.spec.sparse()) << "SparseEncoder is for topk and csc";
  if (options.momentum_correction > 0.0f) velocity_.assign(num_elements, 0.0f);
}

void SparseEncoder::Encode(const float* grad, double density, SparseGradient* out) {
  if (!velocity_.empty()) {
    AccumulateVelocity(options_.momentum_correction, grad, velocity_.data(), residual_.data(),
                       n_);
  } else if (options_.error_feedback) {
    AddInto(grad, residual_.data(), n_);
  } else {
    std::memcpy(residual_.data(), grad, n_ * sizeof(float));
  }
  Select(density, out);
  TakeValues(out);
}

void SparseEncoder::Select(double density, SparseGradient* out) {
  const CodecSpec& spec = options_.spec;
  out->topk = TopKStats();
  if (spec.codec == proto::CSC) {
    const size_t count = chunk_credit_.Take(density, NumChunks(n_, spec.chunk_elements));
    SelectChunks(residual_.data(), n_, spec.chunk_elements, count, &out->ids);
  } else if (spec.exact) {
    SelectTopKExact(residual_.data(), n_, TopKCount(n_, density), &out->ids);
    out->topk.exact = true;
  } else {
    out->topk = SelectTopK(residual_.data(), n_, TopKCount(n_, density), options_.topk, &out->ids);
  }
}

// Moves the selected values out of the residual into `out`: the residual keeps only what was
// not sent (for fp16 values, also each sent value's rounding error: exact in fp32).
void SparseEncoder::TakeValues(SparseGradient* out) {
  const bool half = options_.spec.fp16_values;
  out->values.clear();
  out->half_values.clear();
  size_t count = out->ids.size();
  if (options_.spec.codec == proto::CSC) {
    count = 0;
    for (uint32_t id : out->ids) count += ChunkLength(n_, options_.spec.chunk_elements, id);
  }
  (half ? out->half_values.reserve(count) : out->values.reserve(count));
  float* r = residual_.data();
  auto take = [&](size_t i) {
    if (half) {
      const uint16_t h = FloatToHalf(r[i]);
      out->half_values.push_back(h);
      r[i] -= HalfToFloat(h);
    } else {
      out->values.push_back(r[i]);
      r[i] = 0.0f;
    }
    if (!velocity_.empty()) velocity_[i] = 0.0f;
  };
  if (options_.spec.codec == proto::CSC) {
    const uint32_t chunk = options_.spec.chunk_elements;
    for (uint32_t id : out->ids) {
      const size_t begin = static_cast<size_t>(id) * chunk;
      const size_t end = begin + ChunkLength(n_, chunk, id);
      for (size_t i = begin; i < end; ++i) take(i);
    }
  } else {
    for (uint32_t i : out->ids) take(i);
  }
  if (!options_.error_feedback && velocity_.empty()) {
    std::memset(residual_.data(), 0, n_ * sizeof(float));
  }
}

}  // namespace r2sp::codec
