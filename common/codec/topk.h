// Top-k selection of a gradient's largest magnitudes, for sparse pushes. Two modes:
//  - exact: precisely the k largest |v| (ties at the k-th magnitude go to the lowest indices);
//    a full selection over a copy, for tests and as the fallback.
//  - sampled (Deep Gradient Compression's way): the threshold is the matching order statistic
//    of a strided sample of at least 1% of the values; one pass counts (and collects) what
//    clears it; when the count is off by more than the tolerance the threshold is re-read from
//    the sample at a corrected rank, at most `refinements` times, then exact selection runs.
// Bounds of the sampled mode, for k <= n (tests/common/codec/topk_test.cc checks both):
//  - size: the result has between ceil(k * (1 - tolerance)) and floor(k * (1 + tolerance))
//    indices (exactly k when it fell back to exact selection), and never more than n;
//  - order: every selected |v| is >= every unselected |v| (it is a threshold cut).
// Magnitudes compare as the bit patterns of |v|, so NaN ranks above Inf above every finite
// value: a non-finite gradient is always sent, and the server refuses it (never hidden in a
// residual). Results list indices in increasing order.
#ifndef R2SP_COMMON_CODEC_TOPK_H_
#define R2SP_COMMON_CODEC_TOPK_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace r2sp::codec {

struct TopKOptions {
  double sample_ratio = 0.01;  // sample at least this fraction of the values ...
  size_t min_samples = 4096;   // ... and at least this many (all of them when n is smaller)
  int refinements = 3;         // threshold corrections before exact selection
  double tolerance = 0.25;     // accepted counts: k * (1 -/+ tolerance)
};

struct TopKStats {
  uint64_t passes = 0;  // full passes over the values (1 when the first threshold held)
  bool exact = false;   // fell back to (or asked for) exact selection
};

// The k largest |v| exactly; `indices` is overwritten. k >= n selects everything. `cut`, if not
// null, receives the smallest key taken (0 when none).
void SelectTopKExact(const float* v, size_t n, size_t k, std::vector<uint32_t>* indices,
                     uint32_t* cut = nullptr);

// The sampled selection described above; `indices` is overwritten. REQUIRES: n < 2^32.
// `first_guess` (0: none) is tried before sampling: a pass that counts and collects the values
// at or above it, accepted if the count is within the tolerance (an encoder passes the last
// push's threshold: gradients change little from one push to the next). `chosen`, if not null,
// receives the threshold the result was cut at (for exact selection, the smallest key taken).
TopKStats SelectTopK(const float* v, size_t n, size_t k, const TopKOptions& options,
                     std::vector<uint32_t>* indices, uint32_t first_guess = 0,
                     uint32_t* chosen = nullptr);

class TopKThresholdSearch;
// SelectTopK's part after sampling, for callers that took the sample themselves (the encoder
// takes it while accumulating): the refinement passes, then exact selection if they fail.
// REQUIRES: !search.exact() and its sample set; `indices` has room for search.high() + 1.
TopKStats FinishTopK(const float* v, size_t n, size_t k, TopKThresholdSearch& search,
                     std::vector<uint32_t>* indices, uint32_t* chosen);

// The indices, in increasing order, of the values whose key is at or above `threshold`, over
// one or more consecutive scans: all are counted, the first `capacity` stored in `out` (which
// has room for capacity + 1). A count above capacity means "too many": the stored ones are then
// not all of them. AVX-512 compress-stores where the CPU has them, else AVX2 (a permutation
// table compresses 8 lanes), else branch-free scalar; tests pick each path the CPU runs.
enum class CollectPath { kScalar, kAvx2, kAvx512 };
std::vector<CollectPath> AvailableCollectPaths();  // this CPU's, widest last
CollectPath BestCollectPath();                      // AvailableCollectPaths().back()
const char* CollectPathName(CollectPath path);

class ThresholdCollector {
 public:
  ThresholdCollector(uint32_t threshold, size_t capacity, uint32_t* out)
      : ThresholdCollector(threshold, capacity, out, BestCollectPath()) {}
  // REQUIRES: `path` is one of AvailableCollectPaths().
  ThresholdCollector(uint32_t threshold, size_t capacity, uint32_t* out, CollectPath path)
      : threshold_(threshold), capacity_(capacity), out_(out), path_(path) {}
  // Scans v[0, n), which is element `base` on of the whole vector. REQUIRES: base + n < 2^32.
  void Scan(const float* v, size_t n, size_t base);
  size_t count() const { return count_; }

 private:
  const uint32_t threshold_;
  const size_t capacity_;
  uint32_t* const out_;
  const CollectPath path_;
  size_t count_ = 0;
};

// The key of |x| (see above).
uint32_t MagnitudeKey(float x);

// The sampled mode's threshold search, apart from the passes over the values, so that the CPU
// (SelectTopK) and the GPU encoder (cuda/) make the same choices from the same sample:
//   search(n, k, options); if exact(): select exactly. Else SetSample(the keys at
//   SamplePosition(0 .. sample_size()-1)); then until exhausted(): count the keys >= threshold()
//   and stop if Accept(count). Exhausted: select exactly.
// Keys are |v|'s bit patterns (sign cleared), compared as unsigned integers.
class TopKThresholdSearch {
 public:
  TopKThresholdSearch(size_t n, size_t k, const TopKOptions& options);
  bool exact() const { return sample_size_ == 0; }
  size_t sample_size() const { return sample_size_; }
  // A strided sample, starting half a stride in.
  size_t SamplePosition(size_t j) const { return j * stride_ + stride_ / 2; }
  size_t stride() const { return stride_; }
  // The largest sample_size() for n values and these options, whatever k.
  static size_t MaxSampleSize(size_t n, const TopKOptions& options);
  void SetSample(std::vector<uint32_t> keys);
  uint32_t threshold();  // reorders the sample
  // Whether `count` keys clearing threshold() is within the tolerance; if not, moves the
  // threshold (or marks the search exhausted).
  bool Accept(size_t count);
  bool exhausted() const { return exhausted_; }
  size_t high() const { return high_; }  // the largest count accepted
  // Whether `count` is within the tolerance (without moving the threshold).
  bool within(size_t count) const { return count >= low_ && count <= high_; }

 private:
  const size_t n_, k_;
  const TopKOptions options_;
  size_t stride_ = 0, sample_size_ = 0, low_ = 0, high_ = 0, rank_ = 0;
  std::vector<uint32_t> sample_;
  int attempts_ = 0;
  bool exhausted_ = false;
};

// k for a density: round(ratio * n), at least 1 when n > 0.
size_t TopKCount(size_t n, double ratio);

}  // namespace r2sp::codec

#endif  // R2SP_COMMON_CODEC_TOPK_H_
