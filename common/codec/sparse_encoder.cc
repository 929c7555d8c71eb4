// See sparse_encoder.h.
#include "common/codec/sparse_encoder.h"

#include <algorithm>
#include <cstring>
#include <iterator>

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
  uint32_t last_end = 0;
  for (const auto& [begin, end] : options.dense) {
    CHECK(last_end <= begin && begin < end && end <= num_elements)
        << "dense ranges must increase and lie in the partition: [" << begin << ", " << end
        << ")";
    last_end = end;
    // Fixed for the encoder's life: the values (top-k) or the chunks (csc) every push sends.
    const uint32_t unit = options.spec.codec == proto::CSC ? options.spec.chunk_elements : 1;
    for (uint32_t id = begin / unit; id <= (end - 1) / unit; ++id) {
      if (dense_ids_.empty() || dense_ids_.back() != id) dense_ids_.push_back(id);
    }
  }
  if (options.momentum_correction > 0.0f) velocity_.assign(num_elements, 0.0f);
}

// Blocks of 16K values (64 KiB): the second look at a block finds it in L2.
constexpr size_t kBlock = 16 * 1024;

void SparseEncoder::Accumulate(const float* grad, size_t begin, size_t end) {
  const size_t n = end - begin;
  if (!velocity_.empty()) {
    AccumulateVelocity(options_.momentum_correction, grad + begin, velocity_.data() + begin,
                       residual_.data() + begin, n);
  } else if (options_.error_feedback) {
    AddInto(grad + begin, residual_.data() + begin, n);
  } else {
    std::memcpy(residual_.data() + begin, grad + begin, n * sizeof(float));
  }
}

void SparseEncoder::TakeResidual(float* out) {
  std::memcpy(out, residual_.data(), n_ * sizeof(float));
  std::memset(residual_.data(), 0, n_ * sizeof(float));
}

void SparseEncoder::Encode(const float* grad, double density, SparseGradient* out) {
  const CodecSpec& spec = options_.spec;
  out->topk = TopKStats();
  if (spec.codec == proto::CSC) {
    SelectChunksInOnePass(grad, density, out);
  } else if (spec.exact) {
    Accumulate(grad, 0, n_);
    SelectTopKExact(residual_.data(), n_, TopKCount(n_, density), &out->ids);
    out->topk.exact = true;
  } else {
    SelectTopKBlocked(grad, TopKCount(n_, density), out);
  }
  if (!dense_ids_.empty()) AddDenseIds(&out->ids);
  TakeValues(out);
}

void SparseEncoder::SelectTopKBlocked(const float* grad, size_t k, SparseGradient* out) {
  TopKThresholdSearch search(n_, k, options_.topk);
  if (search.exact()) {
    Accumulate(grad, 0, n_);
    out->topk = SelectTopK(residual_.data(), n_, k, options_.topk, &out->ids, 0, &topk_threshold_);
    return;
  }
  // One pass, block by block: accumulate, take the block's sample keys, and collect against the
  // last push's threshold, all while the block is in cache.
  out->ids.resize(search.high() + 1);
  ThresholdCollector guess(topk_threshold_, search.high(), out->ids.data());
  std::vector<uint32_t> sample(search.sample_size());
  size_t j = 0;
  for (size_t begin = 0; begin < n_; begin += kBlock) {
    const size_t end = std::min(n_, begin + kBlock);
    Accumulate(grad, begin, end);
    for (; j < sample.size() && search.SamplePosition(j) < end; ++j) {
      sample[j] = MagnitudeKey(residual_[search.SamplePosition(j)]);
    }
    // Once more values clear the guess than the tolerance allows, it has failed: stop looking.
    if (topk_threshold_ != 0 && guess.count() <= search.high()) {
      guess.Scan(residual_.data() + begin, end - begin, begin);
    }
  }
  if (topk_threshold_ != 0 && search.within(guess.count())) {
    out->ids.resize(guess.count());
    out->topk.passes = 1;
    return;
  }
  search.SetSample(std::move(sample));
  out->topk = FinishTopK(residual_.data(), n_, k, search, &out->ids, &topk_threshold_);
  ++out->topk.passes;  // the blocked pass
}

void SparseEncoder::SelectChunksInOnePass(const float* grad, double density,
                                          SparseGradient* out) {
  const uint32_t chunk = options_.spec.chunk_elements;
  const size_t chunks = NumChunks(n_, chunk);
  std::vector<float> norms(chunks);
  for (size_t c = 0; c < chunks; ++c) {
    const size_t begin = c * static_cast<size_t>(chunk);
    const size_t end = begin + ChunkLength(n_, chunk, c);
    if (options_.error_feedback && velocity_.empty()) {
      norms[c] = AddIntoAndSquaredNorm(grad + begin, residual_.data() + begin, end - begin);
    } else {
      Accumulate(grad, begin, end);
      norms[c] = ChunkSquaredNorm(residual_.data() + begin, end - begin);
    }
  }
  SelectChunksByNorm(norms, chunk_credit_.Take(density, chunks), &out->ids);
}


void SparseEncoder::AddDenseIds(std::vector<uint32_t>* ids) {
  merged_.clear();
  std::set_union(ids->begin(), ids->end(), dense_ids_.begin(), dense_ids_.end(),
                 std::back_inserter(merged_));
  ids->swap(merged_);
}

// Moves the selected values out of the residual into `out`: the residual keeps only what was
// not sent (for fp16 values, also each sent value's rounding error: exact in fp32).
void SparseEncoder::TakeValues(SparseGradient* out) {
  out->values.clear();
  out->half_values.clear();
  if (options_.spec.codec == proto::CSC) {
    TakeChunks(out);
  } else {
    const bool half = options_.spec.fp16_values;
    (half ? out->half_values.reserve(out->ids.size()) : out->values.reserve(out->ids.size()));
    float* r = residual_.data();
    for (uint32_t i : out->ids) {
      if (half) {
        const uint16_t h = FloatToHalf(r[i]);
        out->half_values.push_back(h);
        r[i] -= HalfToFloat(h);
      } else {
        out->values.push_back(r[i]);
        r[i] = 0.0f;
      }
      if (!velocity_.empty()) velocity_[i] = 0.0f;
    }
  }
  if (!options_.error_feedback && velocity_.empty()) {
    std::memset(residual_.data(), 0, n_ * sizeof(float));
  }
}

// csc's chunks are contiguous: moved out whole (memcpy and memset; fp16 through the vector
// converters), not value by value.
void SparseEncoder::TakeChunks(SparseGradient* out) {
  const bool half = options_.spec.fp16_values;
  const uint32_t chunk = options_.spec.chunk_elements;
  size_t count = 0;
  for (uint32_t id : out->ids) count += ChunkLength(n_, chunk, id);
  if (half) {
    out->half_values.resize(count);
    rounded_.resize(chunk);
  } else {
    out->values.reserve(count);
  }
  size_t at = 0;
  for (uint32_t id : out->ids) {
    const size_t begin = static_cast<size_t>(id) * chunk;
    const size_t length = ChunkLength(n_, chunk, id);
    float* r = residual_.data() + begin;
    if (half) {
      uint16_t* h = out->half_values.data() + at;
      EncodeFp16(r, length, h);
      DecodeFp16(h, length, rounded_.data());
      for (size_t i = 0; i < length; ++i) r[i] -= rounded_[i];  // the rounding error stays
    } else {
      out->values.insert(out->values.end(), r, r + length);
      std::memset(r, 0, length * sizeof(float));
    }
    if (!velocity_.empty()) std::memset(velocity_.data() + begin, 0, length * sizeof(float));
    at += length;
  }
}

}  // namespace r2sp::codec
