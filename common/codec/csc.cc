// See csc.h.
#include "common/codec/csc.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/target_clones.h"

namespace r2sp::codec {

// Sum of squares; eight partial sums so the loop vectorises without -ffast-math.
R2SP_TARGET_CLONES
float ChunkSquaredNorm(const float* __restrict v, size_t n) {
  float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) part[j] += v[i + j] * v[i + j];
  }
  float sum = 0;
  for (; i < n; ++i) sum += v[i] * v[i];
  for (float p : part) sum += p;
  return sum;
}

R2SP_TARGET_CLONES
float AddIntoAndSquaredNorm(const float* __restrict g, float* __restrict acc, size_t n) {
  float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) {
      const float a = acc[i + j] + g[i + j];
      acc[i + j] = a;
      part[j] += a * a;
    }
  }
  float sum = 0;
  for (; i < n; ++i) {
    acc[i] += g[i];
    sum += acc[i] * acc[i];
  }
  for (float p : part) sum += p;
  return sum;
}

size_t NumChunks(size_t n, uint32_t chunk) { return (n + chunk - 1) / chunk; }

size_t ChunkLength(size_t n, uint32_t chunk, size_t id) {
  return std::min<size_t>(chunk, n - id * static_cast<size_t>(chunk));
}

void SelectChunks(const float* v, size_t n, uint32_t chunk, size_t count,
                  std::vector<uint32_t>* ids) {
  const size_t chunks = NumChunks(n, chunk);
  std::vector<float> norms(count == 0 || count >= chunks ? 0 : chunks);
  for (size_t c = 0; c < norms.size(); ++c) {
    norms[c] = ChunkSquaredNorm(v + c * static_cast<size_t>(chunk), ChunkLength(n, chunk, c));
  }
  if (norms.empty()) {  // none or all: no need to rank
    ids->resize(count == 0 ? 0 : chunks);
    std::iota(ids->begin(), ids->end(), 0u);
    return;
  }
  SelectChunksByNorm(norms, count, ids);
}

bool SelectNonzeroChunks(const float* v, size_t n, uint32_t chunk, size_t most,
                         std::vector<uint32_t>* ids) {
  ids->clear();
  const size_t chunks = NumChunks(n, chunk);
  for (size_t c = 0; c < chunks; ++c) {
    const float* begin = v + c * static_cast<size_t>(chunk);
    const float* end = begin + ChunkLength(n, chunk, c);
    if (std::all_of(begin, end, [](float x) { return x == 0.0f; })) continue;
    if (ids->size() == most) return false;
    ids->push_back(static_cast<uint32_t>(c));
  }
  return true;
}

void SelectChunksByNorm(const std::vector<float>& norms, size_t count,
                        std::vector<uint32_t>* ids) {
  const size_t chunks = norms.size();
  ids->resize(chunks);
  std::iota(ids->begin(), ids->end(), 0u);
  if (count >= chunks) return;
  auto rank = [&norms](uint32_t c) {
    return std::isnan(norms[c]) ? std::numeric_limits<float>::infinity() : norms[c];
  };
  auto larger = [&rank](uint32_t a, uint32_t b) {
    return rank(a) > rank(b) || (rank(a) == rank(b) && a < b);
  };
  std::nth_element(ids->begin(), ids->begin() + count, ids->end(), larger);
  ids->resize(count);
  std::sort(ids->begin(), ids->end());
}

size_t ChunkCredit::Take(double density, size_t chunks) {
  if (chunks == 0 || density <= 0) return 0;
  credit_ += density * static_cast<double>(chunks);
  const size_t count =
      std::clamp<size_t>(static_cast<size_t>(credit_ + 1e-9), 1, chunks);
  credit_ = std::max(0.0, credit_ - static_cast<double>(count));
  return count;
}

}  // namespace r2sp::codec
