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
      if (count + hits <= capacity) _mm512_mask_compressstoreu_epi32(out + count, hit, index);
      count += hits;
    }
    index = _mm512_add_epi32(index, step);
  }
  return CollectScalar(v + i, n - i, threshold, base + i, count, capacity, out);
}

bool HaveAvx512() {
  static const bool have = __builtin_cpu_supports("avx512f");
  return have;
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

void ThresholdCollector::Scan(const float* v, size_t n, size_t base) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (HaveAvx512()) {
    count_ = CollectAvx512(v, n, threshold_, base, count_, capacity_, out_);
    return;
  }
#endif
  count_ = CollectScalar(v, n, threshold_, base, count_, capacity_, out_);
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
