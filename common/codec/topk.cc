// See topk.h. The passes work on |v|'s bit pattern (sign cleared) as an unsigned key: for
// non-negative floats the integer order is the magnitude order, NaN included at the top, and
// integer compares vectorise.
#include "common/codec/topk.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "common/target_clones.h"
#include "glog/logging.h"

namespace r2sp::codec {
namespace {

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

TopKThresholdSearch::TopKThresholdSearch(size_t n, size_t k, const TopKOptions& options)
    : n_(n), k_(k), options_(options) {
  const size_t wanted = std::max(options.min_samples,
                                 static_cast<size_t>(std::ceil(options.sample_ratio * n)));
  if (k == 0 || k >= n || wanted >= n) return;  // exact selection
  stride_ = n / wanted;
  sample_size_ = n / stride_;
  low_ = static_cast<size_t>(std::ceil(k * (1.0 - options.tolerance)));
  high_ = static_cast<size_t>(std::floor(k * (1.0 + options.tolerance)));
  // The sample's rank that matches k: k * m / n values of the sample should clear it.
  rank_ = std::min(sample_size_ - 1,
                   static_cast<size_t>(std::ceil(double(k) * sample_size_ / n)) - 1);
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

TopKStats SelectTopK(const float* v, size_t n, size_t k, const TopKOptions& options,
                     std::vector<uint32_t>* indices) {
  TopKStats stats;
  TopKThresholdSearch search(n, k, options);
  if (search.exact()) {
    SelectTopKExact(v, n, k, indices);
    stats.passes = k == 0 || k >= n ? 0 : 1;
    stats.exact = true;
    return stats;
  }
  std::vector<uint32_t> sample(search.sample_size());
  for (size_t j = 0; j < sample.size(); ++j) sample[j] = Key(v[search.SamplePosition(j)]);
  search.SetSample(std::move(sample));
  indices->resize(search.high() + 1);
  while (!search.exhausted()) {
    const uint32_t threshold = search.threshold();
    const size_t count =
        threshold == 0 ? n : CollectAtLeast(v, n, threshold, search.high(), indices->data());
    ++stats.passes;
    if (search.Accept(count)) {
      indices->resize(count);
      // A zero threshold skipped the collecting pass: every index clears it.
      if (threshold == 0) std::iota(indices->begin(), indices->end(), 0u);
      return stats;
    }
  }
  SelectTopKExact(v, n, k, indices);
  ++stats.passes;
  stats.exact = true;
  return stats;
}

}  // namespace r2sp::codec
