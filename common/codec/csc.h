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

// The `count` chunks of `v` with the largest norms (ties to the lowest ids), in increasing id
// order; `ids` is overwritten. count >= NumChunks selects them all.
void SelectChunks(const float* v, size_t n, uint32_t chunk, size_t count,
                  std::vector<uint32_t>* ids);

// The squared L2 norm of n values (a chunk's rank), summed in eight lanes (vectorised).
float ChunkSquaredNorm(const float* v, size_t n);
// acc += g over n values, returning ChunkSquaredNorm of the result (the same float, bit for bit)
// from the same pass: error feedback's add and the chunk's norm read the chunk once.
float AddIntoAndSquaredNorm(const float* g, float* acc, size_t n);

// The ids of the chunks of `v` holding any value other than zero (NaN included), in increasing
// order: a lossless csc push of a gradient that leaves most of its rows zero (an embedding's).
// Stops, returning false, once more than `most` are found; `ids` is overwritten.
bool SelectNonzeroChunks(const float* v, size_t n, uint32_t chunk, size_t most,
                         std::vector<uint32_t>* ids);

// The same from the chunks' squared norms (the GPU encoder computes them on the device); a NaN
// norm ranks as +Inf. `ids` is overwritten.
void SelectChunksByNorm(const std::vector<float>& norms, size_t count,
                        std::vector<uint32_t>* ids);

// How many chunks each push of a partition sends: at least one, and when density x chunks is
// more than one but not whole, the fraction is carried as credit from push to push, so the count
// averages density x chunks. (Fewer than one chunk a push, sending one chunk every few pushes
// with all their gradients at once, made the cnn diverge in BSP at csc:0.05:
// docs/RESULTS.md#wire-codecs.)
class ChunkCredit {
 public:
  // The chunks this push sends, of `chunks`, at `density` in [0, 1].
  size_t Take(double density, size_t chunks);

 private:
  double credit_ = 0;
};

}  // namespace r2sp::codec

#endif  // R2SP_COMMON_CODEC_CSC_H_
