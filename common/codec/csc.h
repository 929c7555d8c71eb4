// Coarse-grained sparse communication (GradientFlow): a gradient is cut into fixed chunks of
// `chunk` values (the last one shorter) and the chunks with the largest L2 norms travel whole,
// as their ids plus their dense values, so the receiver adds dense runs and pays no per-value
// index. A chunk holding NaN or Inf ranks first (it is sent, and the server refuses it).
#ifndef R2SP_COMMON_CODEC_CSC_H_
#define R2SP_COMMON_CODEC_CSC_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace r2sp::codec {

// ceil(n / chunk). REQUIRES: chunk > 0.
size_t NumChunks(size_t n, uint32_t chunk);
// The values in chunk `id`: chunk, or what is left for the last one.
size_t ChunkLength(size_t n, uint32_t chunk, size_t id);
// How many chunks a ratio sends: round(ratio * chunks), at least 1 when there are chunks.
size_t ChunkCount(size_t n, uint32_t chunk, double ratio);

// The `count` chunks of `v` with the largest norms (ties to the lowest ids), in increasing id
// order; `ids` is overwritten. count >= NumChunks selects them all.
void SelectChunks(const float* v, size_t n, uint32_t chunk, size_t count,
                  std::vector<uint32_t>* ids);

}  // namespace r2sp::codec

#endif  // R2SP_COMMON_CODEC_CSC_H_
