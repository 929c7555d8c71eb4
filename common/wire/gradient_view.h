// A pushed gradient as the push decoder (push_frames.h) hands it on, without a dense copy
// of a sparse one: dense fp32 values, (index, value) pairs (top-k), or dense chunks (csc). The
// optimizer (PartitionState::Apply) and BSP's per-clock sum (ClockAggregator::Add) consume each
// kind directly. The pointers borrow the request's frames or the decoder's scratch.
#ifndef R2SP_COMMON_WIRE_GRADIENT_VIEW_H_
#define R2SP_COMMON_WIRE_GRADIENT_VIEW_H_

#include <cstddef>
#include <cstdint>

#include "common/codec/csc.h"

namespace r2sp::wire {

struct GradientView {
  enum class Kind { kDense, kSparse, kChunks };
  Kind kind = Kind::kDense;
  size_t num_elements = 0;       // the partition's
  const float* dense = nullptr;  // kDense: num_elements values
  // kSparse: element indices; kChunks: chunk ids. Strictly increasing, in range (validated).
  const uint32_t* ids = nullptr;
  size_t count = 0;
  // kSparse: one value per id; kChunks: the chunks' values, whole and in id order.
  const float* values = nullptr;
  uint32_t chunk_elements = 0;  // kChunks

  static GradientView Dense(const float* values, size_t n) {
    GradientView g;
    g.num_elements = n;
    g.dense = values;
    return g;
  }

  // kChunks: calls fn(begin, length, values) for each chunk, in order.
  template <typename Fn>
  void ForEachChunk(Fn fn) const {
    const float* v = values;
    for (size_t j = 0; j < count; ++j) {
      const size_t begin = static_cast<size_t>(ids[j]) * chunk_elements;
      const size_t length = codec::ChunkLength(num_elements, chunk_elements, ids[j]);
      fn(begin, length, v);
      v += length;
    }
  }
};

}  // namespace r2sp::wire

#endif  // R2SP_COMMON_WIRE_GRADIENT_VIEW_H_
