// See topk.h. The passes work on |v|'s bit pattern (sign cleared) as an unsigned key: for
// non-negative floats the integer order is the magnitude order, NaN included at the top, and
// integer compares vectorise.
#include "common/codec/topk.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "common/target_clones.h"
#include "glog/logging.h"

namespace r2sp::codec {
namespace {

// Branch-free scalar collection: every index is stored, the cursor moves only for a hit (the
// slot at `capacity` takes the writes that do not count).
R2SP_TARGET_CLONES
size_t CollectScalar(const float* __restrict v, size_t n, uint32_t threshold, size_t base,
                     size_t count, size_t capacity, uint32_t* __restrict out) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &v[i], sizeof(bits));
    const size_t hit = (bits & 0x7fffffffu) >= threshold;
    out[count < capacity ? count : capacity] = static_cast<uint32_t>(base + i);
    count += hit;
  }
  return count;
}

#if defined(__x86_64__) && defined(__GNUC__)
// 16 values a step: compare the keys, compress-store the hits' indices.
__attribute__((target("avx512f"))) size_t CollectAvx512(const float* v, size_t n,
                                                        uint32_t threshold, size_t base,
                                                        size_t count, size_t capacity,
                                                        uint32_t* out) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i limit = _mm512_set1_epi32(static_cast<int>(threshold));
  const __m512i step = _mm512_set1_epi32(16);
  __m512i index = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(base)),
                                   _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
                                                     13, 14, 15));
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i key = _mm512_and_si512(_mm512_loadu_si512(v + i), abs_mask);
    const __mmask16 hit = _mm512_cmpge_epu32_mask(key, limit);
    if (hit != 0) {
      const size_t hits = static_cast<size_t>(__builtin_popcount(hit));
      unsigned kept = hit;
      if (count + hits > capacity) {  // the first `capacity - count` hits only, if any
        kept = 0;
        for (unsigned rest = hit; count + __builtin_popcount(kept) < capacity; rest &= rest - 1) {
          kept |= rest & (0u - rest);  // the lowest hit left
        }
      }
      if (kept != 0) {
        _mm512_mask_compressstoreu_epi32(out + count, static_cast<__mmask16>(kept), index);
      }
      count += hits;
    }
    index = _mm512_add_epi32(index, step);
  }
  return CollectScalar(v + i, n - i, threshold, base + i, count, capacity, out);
}

// The lanes of each 8-bit hit mask, packed to the front: a permutation for vpermd.
struct CompressTable {
  alignas(32) uint32_t lanes[256][8];
};
constexpr CompressTable MakeCompressTable() {
  CompressTable table{};
  for (int mask = 0; mask < 256; ++mask) {
    int next = 0;
    for (int lane = 0; lane < 8; ++lane) {
      if ((mask >> lane) & 1) table.lanes[mask][next++] = static_cast<uint32_t>(lane);
    }
  }
  return table;
}
constexpr CompressTable kCompress = MakeCompressTable();

// The hit mask of the 8 keys at v: bit j set when |v[j]|'s key > below.
__attribute__((target("avx2"))) inline unsigned HitsAvx2(const float* v, __m256i abs_mask,
                                                         __m256i below) {
  const __m256i key =
      _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v)), abs_mask);
  return static_cast<unsigned>(
      _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(key, below))));
}

// Stores the indices (`lanes`) of `hit`'s set bits at out + count; returns the new count. A
// whole vector where 8 slots are left, else one by one as the scalar path does.
__attribute__((target("avx2,popcnt"))) inline size_t StoreHitsAvx2(unsigned hit, __m256i lanes,
                                                                   size_t count, size_t capacity,
                                                                   uint32_t* out) {
  if (count + 8 <= capacity) {
    const __m256i order = _mm256_load_si256(reinterpret_cast<const __m256i*>(kCompress.lanes[hit]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + count),
                        _mm256_permutevar8x32_epi32(lanes, order));
    return count + static_cast<size_t>(__builtin_popcount(hit));
  }
  alignas(32) uint32_t index[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(index), lanes);
  for (; hit != 0; hit &= hit - 1) {
    out[count < capacity ? count : capacity] = index[__builtin_ctz(hit)];
    ++count;
  }
  return count;
}

// 16 values a step (two vectors, one test for the common case of no hit): keys compared as
// signed integers, exact because keys and a threshold below 2^31 are non-negative; the hits'
// indices packed with a permutation.
__attribute__((target("avx2,popcnt"))) size_t CollectAvx2(const float* v, size_t n,
                                                          uint32_t threshold, size_t base,
                                                          size_t count, size_t capacity,
                                                          uint32_t* out) {
  if (threshold == 0 || threshold > 0x7fffffffu) {  // every key hits, or none: no compare needed
    return CollectScalar(v, n, threshold, base, count, capacity, out);
  }
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i below = _mm256_set1_epi32(static_cast<int>(threshold - 1));
  const __m256i step = _mm256_set1_epi32(8);
  __m256i index = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(base)),
                                   _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const unsigned low = HitsAvx2(v + i, abs_mask, below);
    const unsigned high = HitsAvx2(v + i + 8, abs_mask, below);
    if ((low | high) != 0) {
      if (low != 0) count = StoreHitsAvx2(low, index, count, capacity, out);
      if (high != 0) {
        count = StoreHitsAvx2(high, _mm256_add_epi32(index, step), count, capacity, out);
      }
    }
    index = _mm256_add_epi32(index, _mm256_add_epi32(step, step));
  }
  return CollectScalar(v + i, n - i, threshold, base + i, count, capacity, out);
}
#endif

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

void SelectExactly(const float* v, size_t n, size_t k, std::vector<uint32_t>* indices);

// The sample size asked for: the larger of the ratio's and the minimum.
size_t WantedSamples(size_t n, const TopKOptions& options) {
  return std::max(options.min_samples, static_cast<size_t>(std::ceil(options.sample_ratio * n)));
}

// The r-th largest (0-based) of `keys`, reordering them.
uint32_t RankedKey(std::vector<uint32_t>& keys, size_t r) {
  std::nth_element(keys.begin(), keys.begin() + r, keys.end(), std::greater<uint32_t>());
  return keys[r];
}

}  // namespace

uint32_t MagnitudeKey(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits & 0x7fffffffu;
}

std::vector<CollectPath> AvailableCollectPaths() {
  std::vector<CollectPath> paths = {CollectPath::kScalar};
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt")) {
    paths.push_back(CollectPath::kAvx2);
  }
  if (__builtin_cpu_supports("avx512f")) paths.push_back(CollectPath::kAvx512);
#endif
  return paths;
}

CollectPath BestCollectPath() {
  static const CollectPath best = AvailableCollectPaths().back();
  return best;
}

const char* CollectPathName(CollectPath path) {
  switch (path) {
    case CollectPath::kScalar:
      return "scalar";
    case CollectPath::kAvx2:
      return "avx2";
    case CollectPath::kAvx512:
      return "avx512";
  }
  return "?";
}

void ThresholdCollector::Scan(const float* v, size_t n, size_t base) {
  switch (path_) {
#if defined(__x86_64__) && defined(__GNUC__)
    case CollectPath::kAvx512:
      count_ = CollectAvx512(v, n, threshold_, base, count_, capacity_, out_);
      return;
    case CollectPath::kAvx2:
      count_ = CollectAvx2(v, n, threshold_, base, count_, capacity_, out_);
      return;
#endif
    default:
      count_ = CollectScalar(v, n, threshold_, base, count_, capacity_, out_);
  }
}

size_t TopKCount(size_t n, double ratio) {
  if (n == 0) return 0;
  const double k = std::round(ratio * static_cast<double>(n));
  return std::clamp<size_t>(static_cast<size_t>(k), 1, n);
}

void SelectTopKExact(const float* v, size_t n, size_t k, std::vector<uint32_t>* indices,
                     uint32_t* cut) {
  SelectExactly(v, n, k, indices);
  if (cut != nullptr) {
    uint32_t smallest = 0xffffffffu;
    for (uint32_t i : *indices) smallest = std::min(smallest, MagnitudeKey(v[i]));
    *cut = indices->empty() ? 0 : smallest;
  }
}

namespace {
void SelectExactly(const float* v, size_t n, size_t k, std::vector<uint32_t>* indices) {
  indices->clear();
  if (k == 0) return;
  if (k >= n) {
    indices->resize(n);
    for (size_t i = 0; i < n; ++i) (*indices)[i] = static_cast<uint32_t>(i);
    return;
  }
  std::vector<uint32_t> keys(n);
  for (size_t i = 0; i < n; ++i) keys[i] = MagnitudeKey(v[i]);
  const uint32_t kth = RankedKey(keys, k - 1);
  // Everything above the k-th magnitude, then the lowest-indexed ties up to k in all.
  size_t ties = k - CountAtLeast(v, n, kth + 1);  // keys are at most 0x7fffffff
  indices->reserve(k);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t key = MagnitudeKey(v[i]);
    if (key > kth) {
      indices->push_back(static_cast<uint32_t>(i));
    } else if (key == kth && ties > 0) {
      indices->push_back(static_cast<uint32_t>(i));
      --ties;
    }
  }
  DCHECK_EQ(indices->size(), k);
}
}  // namespace

TopKThresholdSearch::TopKThresholdSearch(size_t n, size_t k, const TopKOptions& options)
    : n_(n), k_(k), options_(options) {
  const size_t wanted = WantedSamples(n, options);
  if (k == 0 || k >= n || wanted >= n) return;  // exact selection
  stride_ = n / wanted;
  sample_size_ = n / stride_;
  low_ = static_cast<size_t>(std::ceil(k * (1.0 - options.tolerance)));
  high_ = static_cast<size_t>(std::floor(k * (1.0 + options.tolerance)));
  // The sample's rank that matches k: k * m / n values of the sample should clear it.
  rank_ = std::min(sample_size_ - 1,
                   static_cast<size_t>(std::ceil(double(k) * sample_size_ / n)) - 1);
}

size_t TopKThresholdSearch::MaxSampleSize(size_t n, const TopKOptions& options) {
  return 2 * WantedSamples(n, options) + 1;  // n / (n / wanted) < 2 * wanted
}

void TopKThresholdSearch::SetSample(std::vector<uint32_t> keys) {
  CHECK_EQ(keys.size(), sample_size_);
  sample_ = std::move(keys);
}

uint32_t TopKThresholdSearch::threshold() {
  DCHECK(!sample_.empty());
  return RankedKey(sample_, rank_);
}

bool TopKThresholdSearch::Accept(size_t count) {
  ++attempts_;
  if (count >= low_ && count <= high_) return true;
  if (attempts_ > options_.refinements) {
    exhausted_ = true;
    return false;
  }
  // Too many or too few cleared it: read the threshold at the rank that, were the sample's
  // proportion right, gives k (always moving at least one rank).
  const size_t m = sample_size_;
  const double corrected = std::round((rank_ + 1.0) * double(k_) / std::max<size_t>(count, 1)) - 1;
  size_t next = static_cast<size_t>(std::clamp(corrected, 0.0, double(m - 1)));
  if (next == rank_) {
    next = count > high_ ? (rank_ > 0 ? rank_ - 1 : rank_) : std::min(m - 1, rank_ + 1);
  }
  if (next == rank_) exhausted_ = true;  // the sample has nothing finer to offer
  rank_ = next;
  return false;
}

namespace {

TopKStats Exact(const float* v, size_t n, size_t k, std::vector<uint32_t>* indices,
                uint32_t* chosen, TopKStats stats) {
  SelectTopKExact(v, n, k, indices, chosen);
  stats.exact = true;
  return stats;
}

// Counts and collects the keys at or above `threshold` in one pass.
size_t Collect(const float* v, size_t n, uint32_t threshold, size_t capacity,
               std::vector<uint32_t>* indices) {
  ThresholdCollector collector(threshold, capacity, indices->data());
  collector.Scan(v, n, 0);
  return collector.count();
}

}  // namespace

TopKStats FinishTopK(const float* v, size_t n, size_t k, TopKThresholdSearch& search,
                     std::vector<uint32_t>* indices, uint32_t* chosen) {
  TopKStats stats;
  while (!search.exhausted()) {
    const uint32_t threshold = search.threshold();
    ++stats.passes;
    // A zero threshold takes everything: no pass needed to count.
    const size_t count = threshold == 0 ? n : Collect(v, n, threshold, search.high(), indices);
    if (search.Accept(count)) {
      indices->resize(count);
      if (threshold == 0) std::iota(indices->begin(), indices->end(), 0u);
      if (chosen != nullptr) *chosen = threshold;
      return stats;
    }
  }
  ++stats.passes;
  return Exact(v, n, k, indices, chosen, stats);
}

TopKStats SelectTopK(const float* v, size_t n, size_t k, const TopKOptions& options,
                     std::vector<uint32_t>* indices, uint32_t first_guess, uint32_t* chosen) {
  TopKThresholdSearch search(n, k, options);
  if (search.exact()) {
    TopKStats stats;
    stats.passes = k == 0 || k >= n ? 0 : 1;
    return Exact(v, n, k, indices, chosen, stats);
  }
  indices->resize(search.high() + 1);
  uint64_t guessed = 0;
  if (first_guess != 0) {
    const size_t count = Collect(v, n, first_guess, search.high(), indices);
    ++guessed;
    if (search.within(count)) {
      indices->resize(count);
      if (chosen != nullptr) *chosen = first_guess;
      TopKStats stats;
      stats.passes = 1;
      return stats;
    }
  }
  std::vector<uint32_t> sample(search.sample_size());
  for (size_t j = 0; j < sample.size(); ++j) sample[j] = MagnitudeKey(v[search.SamplePosition(j)]);
  search.SetSample(std::move(sample));
  TopKStats stats = FinishTopK(v, n, k, search, indices, chosen);
  stats.passes += guessed;
  return stats;
}

}  // namespace r2sp::codec
