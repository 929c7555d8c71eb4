// See topk.h. The passes work on |v|'s bit pattern (sign cleared) as an unsigned key: for
// non-negative floats the integer order is the magnitude order, NaN included at the top, and
// integer compares vectorise.
#include "common/codec/topk.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "glog/logging.h"

namespace r2sp::codec {
namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define R2SP_TARGET_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define R2SP_TARGET_CLONES
#endif

inline uint32_t Key(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits & 0x7fffffffu;
}

// Counts the keys >= threshold and writes the first `capacity` of their indices to `out`
// (which has room for capacity + 1: the slot past the end takes the writes that do not count).
// Branch-free: every index is stored, the cursor moves only for a hit.
R2SP_TARGET_CLONES
size_t CollectAtLeast(const float* __restrict v, size_t n, uint32_t threshold, size_t capacity,
                      uint32_t* __restrict out) {
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &v[i], sizeof(bits));
    const size_t hit = (bits & 0x7fffffffu) >= threshold;
    out[count < capacity ? count : capacity] = static_cast<uint32_t>(i);
    count += hit;
  }
  return count;
}

R2SP_TARGET_CLONES
size_t CountAtLeast(const float* __restrict v, size_t n, uint32_t threshold) {
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &v[i], sizeof(bits));
    count += (bits & 0x7fffffffu) >= threshold;
  }
  return count;
}

// The r-th largest (0-based) of `keys`, reordering them.
uint32_t RankedKey(std::vector<uint32_t>& keys, size_t r) {
  std::nth_element(keys.begin(), keys.begin() + r, keys.end(), std::greater<uint32_t>());
  return keys[r];
}

}  // namespace

size_t TopKCount(size_t n, double ratio) {
  if (n == 0) return 0;
  const double k = std::round(ratio * static_cast<double>(n));
  return std::clamp<size_t>(static_cast<size_t>(k), 1, n);
}

void SelectTopKExact(const float* v, size_t n, size_t k, std::vector<uint32_t>* indices) {
  indices->clear();
  if (k == 0) return;
  if (k >= n) {
    indices->resize(n);
    for (size_t i = 0; i < n; ++i) (*indices)[i] = static_cast<uint32_t>(i);
    return;
  }
  std::vector<uint32_t> keys(n);
  for (size_t i = 0; i < n; ++i) keys[i] = Key(v[i]);
  const uint32_t kth = RankedKey(keys, k - 1);
  // Everything above the k-th magnitude, then the lowest-indexed ties up to k in all.
  size_t ties = k - CountAtLeast(v, n, kth + 1);  // keys are at most 0x7fffffff
  indices->reserve(k);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t key = Key(v[i]);
    if (key > kth) {
      indices->push_back(static_cast<uint32_t>(i));
    } else if (key == kth && ties > 0) {
      indices->push_back(static_cast<uint32_t>(i));
      --ties;
    }
  }
  DCHECK_EQ(indices->size(), k);
}

TopKStats SelectTopK(const float* v, size_t n, size_t k, const TopKOptions& options,
                     std::vector<uint32_t>* indices) {
  TopKStats stats;
  const size_t wanted = std::max(options.min_samples,
                                 static_cast<size_t>(std::ceil(options.sample_ratio * n)));
  if (k == 0 || k >= n || wanted >= n) {
    SelectTopKExact(v, n, k, indices);
    stats.passes = k == 0 || k >= n ? 0 : 1;
    stats.exact = true;
    return stats;
  }
  // A strided sample, starting half a stride in.
  const size_t stride = n / wanted;
  const size_t m = n / stride;
  std::vector<uint32_t> sample(m);
  for (size_t j = 0; j < m; ++j) sample[j] = Key(v[j * stride + stride / 2]);

  const size_t low = static_cast<size_t>(std::ceil(k * (1.0 - options.tolerance)));
  const size_t high = static_cast<size_t>(std::floor(k * (1.0 + options.tolerance)));
  // The sample's rank that matches k: k * m / n values of the sample should clear it.
  size_t rank = std::min(m - 1, static_cast<size_t>(std::ceil(double(k) * m / n)) - 1);
  indices->resize(high + 1);
  for (int attempt = 0; attempt <= options.refinements; ++attempt) {
    const uint32_t threshold = RankedKey(sample, rank);
    const size_t count = threshold == 0 ? n : CollectAtLeast(v, n, threshold, high, indices->data());
    ++stats.passes;
    if (count >= low && count <= high) {
      indices->resize(count);
      // A zero threshold skipped the collecting pass: every index clears it.
      if (threshold == 0) std::iota(indices->begin(), indices->end(), 0u);
      return stats;
    }
    // Too many or too few cleared it: read the threshold at the rank that, were the sample's
    // proportion right, gives k (always moving at least one rank).
    const double corrected = std::round((rank + 1.0) * double(k) / std::max<size_t>(count, 1)) - 1;
    size_t next = static_cast<size_t>(std::clamp(corrected, 0.0, double(m - 1)));
    if (next == rank) next = count > high ? (rank > 0 ? rank - 1 : rank) : std::min(m - 1, rank + 1);
    if (next == rank) break;  // the sample has nothing finer to offer
    rank = next;
  }
  SelectTopKExact(v, n, k, indices);
  ++stats.passes;
  stats.exact = true;
  return stats;
}

}  // namespace r2sp::codec
