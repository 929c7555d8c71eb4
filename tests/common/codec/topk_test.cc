// Top-k selection: exact mode against a sort-based reference (ties to the lowest indices, NaN
// above Inf above finite values), and the sampled mode's documented bounds (size within the
// tolerance, a threshold cut, increasing indices) over many sizes, densities and distributions.
#include "common/codec/topk.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace r2sp::codec {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

uint32_t Magnitude(float x) {  // |x| as an ordered key: NaN > Inf > finite
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits & 0x7fffffffu;
}

// The k largest magnitudes, ties to the lowest indices, in increasing index order.
std::vector<uint32_t> Reference(const std::vector<float>& v, size_t k) {
  std::vector<uint32_t> order(v.size());
  for (size_t i = 0; i < v.size(); ++i) order[i] = static_cast<uint32_t>(i);
  std::sort(order.begin(), order.end(), [&v](uint32_t a, uint32_t b) {
    return Magnitude(v[a]) > Magnitude(v[b]) || (Magnitude(v[a]) == Magnitude(v[b]) && a < b);
  });
  order.resize(std::min(k, v.size()));
  std::sort(order.begin(), order.end());
  return order;
}

std::vector<uint32_t> Exact(const std::vector<float>& v, size_t k) {
  std::vector<uint32_t> indices = {7, 7, 7};  // overwritten
  SelectTopKExact(v.data(), v.size(), k, &indices);
  return indices;
}

TEST(TopKTest, ExactMatchesSortReference) {
  std::mt19937 rng(12);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> small(-4, 4);  // many ties
  for (size_t n : {1, 2, 3, 7, 64, 100, 1000, 5000}) {
    for (int trial = 0; trial < 6; ++trial) {
      std::vector<float> v(n);
      for (float& x : v) x = trial % 2 == 0 ? normal(rng) : static_cast<float>(small(rng));
      for (size_t k : {size_t{0}, size_t{1}, n / 3, n / 2, n - 1, n, n + 5}) {
        EXPECT_EQ(Exact(v, k), Reference(v, k)) << "n=" << n << " k=" << k << " trial " << trial;
      }
    }
  }
}

TEST(TopKTest, ExactBreaksTiesToLowestIndices) {
  const std::vector<float> v = {1, -3, 3, 2, 3, -3, 0};
  EXPECT_EQ(Exact(v, 1), (std::vector<uint32_t>{1}));
  EXPECT_EQ(Exact(v, 2), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(Exact(v, 3), (std::vector<uint32_t>{1, 2, 4}));
  EXPECT_EQ(Exact(v, 5), (std::vector<uint32_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(Exact(std::vector<float>(5, 0.0f), 2), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(Exact({-0.0f, 0.0f, -0.0f}, 2), (std::vector<uint32_t>{0, 1}));  // -0 ties +0
}

TEST(TopKTest, NonFiniteRankFirst) {
  const std::vector<float> v = {1e30f, kInf, 5, kNaN, -kInf, -3e38f};
  EXPECT_EQ(Exact(v, 1), (std::vector<uint32_t>{3}));
  EXPECT_EQ(Exact(v, 2), (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(Exact(v, 3), (std::vector<uint32_t>{1, 3, 4}));
  EXPECT_EQ(Exact(v, 4), (std::vector<uint32_t>{1, 3, 4, 5}));
  EXPECT_EQ(Exact({-kNaN, 1}, 1), (std::vector<uint32_t>{0}));

  // The sampled mode sends them too, even when the sample misses them.
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> big(300000);
  for (float& x : big) x = normal(rng) * 1e6f;
  big[123457] = kNaN;
  big[200001] = -kInf;
  std::vector<uint32_t> indices;
  SelectTopK(big.data(), big.size(), 300, TopKOptions(), &indices);
  EXPECT_TRUE(std::binary_search(indices.begin(), indices.end(), 123457u));
  EXPECT_TRUE(std::binary_search(indices.begin(), indices.end(), 200001u));
  SelectTopK(big.data(), big.size(), 1, TopKOptions(), &indices);
  EXPECT_EQ(indices, (std::vector<uint32_t>{123457}));
}

// Checks the bounds topk.h documents for SelectTopK(v, k) with the default options.
void CheckSampled(const std::vector<float>& v, size_t k, const std::string& context) {
  const TopKOptions options;
  std::vector<uint32_t> indices(17, 3);  // stale contents must not leak into the result
  const TopKStats stats = SelectTopK(v.data(), v.size(), k, options, &indices);
  const size_t n = v.size();
  ASSERT_LE(indices.size(), n) << context;
  if (stats.exact) {
    ASSERT_EQ(indices.size(), std::min(k, n)) << context;
  } else {
    ASSERT_GE(indices.size(), static_cast<size_t>(std::ceil(k * (1.0 - options.tolerance))))
        << context;
    ASSERT_LE(indices.size(), static_cast<size_t>(std::floor(k * (1.0 + options.tolerance))))
        << context;
  }
  std::vector<char> chosen(n, 0);
  for (size_t j = 0; j < indices.size(); ++j) {
    ASSERT_LT(indices[j], n) << context;
    if (j > 0) {
      ASSERT_LT(indices[j - 1], indices[j]) << context << " at " << j;
    }
    chosen[indices[j]] = 1;
  }
  uint32_t min_chosen = std::numeric_limits<uint32_t>::max();
  uint32_t max_left = 0;
  bool any_left = false;
  for (size_t i = 0; i < n; ++i) {
    if (chosen[i]) {
      min_chosen = std::min(min_chosen, Magnitude(v[i]));
    } else {
      max_left = std::max(max_left, Magnitude(v[i]));
      any_left = true;
    }
  }
  if (any_left && !indices.empty()) {
    ASSERT_GE(min_chosen, max_left) << context;
  }
  if (stats.exact) {
    ASSERT_EQ(indices, Reference(v, k)) << context;
  }
}

struct Distribution {
  const char* name;
  std::function<float(std::mt19937&)> draw;
};

std::vector<Distribution> Distributions() {
  return {
      {"normal", [](std::mt19937& r) { return std::normal_distribution<float>()(r); }},
      {"uniform", [](std::mt19937& r) { return std::uniform_real_distribution<float>(-1, 1)(r); }},
      {"cauchy", [](std::mt19937& r) { return std::cauchy_distribution<float>()(r); }},
      {"half zeros",
       [](std::mt19937& r) { return r() % 2 == 0 ? 0.0f : std::normal_distribution<float>()(r); }},
      {"95% zeros",
       [](std::mt19937& r) { return r() % 20 != 0 ? 0.0f : std::normal_distribution<float>()(r); }},
      {"all equal", [](std::mt19937&) { return -0.5f; }},
      {"few levels",
       [](std::mt19937& r) { return static_cast<float>(static_cast<int>(r() % 7) - 3); }},
  };
}

TEST(TopKTest, SampledKeepsItsBounds) {
  std::mt19937 rng(2024);
  for (const Distribution& d : Distributions()) {
    for (size_t n : {100, 4096, 4097, 10007, 65536, 250000}) {
      std::vector<float> v(n);
      for (float& x : v) x = d.draw(rng);
      for (double ratio : {0.001, 0.01, 0.1}) {
        const size_t k = TopKCount(n, ratio);
        CheckSampled(v, k,
                     std::string(d.name) + " n=" + std::to_string(n) + " k=" + std::to_string(k));
      }
    }
  }
}

TEST(TopKTest, SampledKeepsItsBoundsOnLargeInputs) {
  std::mt19937 rng(7);
  for (const Distribution& d : Distributions()) {
    if (std::string(d.name) != "normal" && std::string(d.name) != "cauchy" &&
        std::string(d.name) != "95% zeros") {
      continue;
    }
    std::vector<float> v(2000000);
    for (float& x : v) x = d.draw(rng);
    for (double ratio : {0.001, 0.01, 0.1}) {
      CheckSampled(v, TopKCount(v.size(), ratio),
                   std::string(d.name) + " 2M at " + std::to_string(ratio));
    }
  }
}

// A warm-up asks for densities near 1, where a sampled threshold of 0 (many exact zeros)
// clears everything.
TEST(TopKTest, SampledKeepsItsBoundsAtHighDensity) {
  std::mt19937 rng(99);
  for (const Distribution& d : Distributions()) {
    std::vector<float> v(20000);
    for (float& x : v) x = d.draw(rng);
    for (double ratio : {0.5, 0.8, 0.85, 0.9, 0.99}) {
      CheckSampled(v, TopKCount(v.size(), ratio),
                   std::string(d.name) + " at " + std::to_string(ratio));
    }
  }
}

TEST(TopKTest, SampledEdgeCases) {
  std::vector<float> v = {3, -1, 2};
  std::vector<uint32_t> indices = {9};
  TopKStats stats = SelectTopK(v.data(), v.size(), 0, TopKOptions(), &indices);
  EXPECT_TRUE(indices.empty());
  stats = SelectTopK(v.data(), v.size(), 5, TopKOptions(), &indices);
  EXPECT_EQ(indices, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_TRUE(stats.exact);
  stats = SelectTopK(v.data(), 0, 1, TopKOptions(), &indices);
  EXPECT_TRUE(indices.empty());
  // Below min_samples the selection is exact.
  stats = SelectTopK(v.data(), v.size(), 1, TopKOptions(), &indices);
  EXPECT_EQ(indices, (std::vector<uint32_t>{0}));
  EXPECT_TRUE(stats.exact);
}

TEST(TopKTest, FirstThresholdUsuallyHolds) {
  std::mt19937 rng(42);
  std::normal_distribution<float> normal;
  std::vector<float> v(1000000);
  for (float& x : v) x = normal(rng);
  std::vector<uint32_t> indices;
  const TopKStats stats = SelectTopK(v.data(), v.size(), 10000, TopKOptions(), &indices);
  EXPECT_EQ(stats.passes, 1u);
  EXPECT_FALSE(stats.exact);
  EXPECT_GE(indices.size(), 7500u);
  EXPECT_LE(indices.size(), 12500u);

  int first_pass = 0;
  for (int trial = 0; trial < 10; ++trial) {
    std::vector<float> w(200000);
    for (float& x : w) x = normal(rng);
    first_pass += SelectTopK(w.data(), w.size(), 2000, TopKOptions(), &indices).passes == 1;
  }
  EXPECT_GE(first_pass, 8);
}

TEST(TopKTest, TopKCountRoundsWithAMinimumOfOne) {
  EXPECT_EQ(TopKCount(0, 0.5), 0u);
  EXPECT_EQ(TopKCount(1000, 0.01), 10u);
  EXPECT_EQ(TopKCount(8, 0.25), 2u);
  EXPECT_EQ(TopKCount(8, 0.1875), 2u);  // 1.5 rounds up
  EXPECT_EQ(TopKCount(8, 0.3125), 3u);  // 2.5 rounds away from zero
  EXPECT_EQ(TopKCount(8, 0.15), 1u);    // 1.2
  EXPECT_EQ(TopKCount(8, 0.01), 1u);    // 0.08: at least one
  EXPECT_EQ(TopKCount(1, 0.001), 1u);
  EXPECT_EQ(TopKCount(8, 1.0), 8u);
  EXPECT_EQ(TopKCount(2000000, 0.001), 2000u);
}

// ThresholdCollector against a plain loop, on every path this CPU runs (scalar, AVX2, AVX-512):
// every size around the vector widths, any base offset, consecutive scans, thresholds that
// every key, some, only NaN or none clear, and the capacity cut (all counted, the first
// `capacity` kept, nothing written past the slot at `capacity`).
TEST(TopKTest, ThresholdCollectorMatchesAPlainLoopOnEveryPath) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  for (const CollectPath path : AvailableCollectPaths()) {
    SCOPED_TRACE(CollectPathName(path));
    for (size_t n : {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 1000, 4099}) {
      std::vector<float> v(n);
      for (float& x : v) x = normal(rng);
      if (n > 3) v[3] = kNaN;
      if (n > 20) v[20] = -std::numeric_limits<float>::infinity();
      if (n > 9) v[5] = 1.0f, v[9] = -2.5f;  // exactly at a threshold: a hit
      for (uint32_t threshold : {0u, MagnitudeKey(1.0f), MagnitudeKey(2.5f), 0x7f800000u,
                                 0x80000000u}) {
        std::vector<uint32_t> want;
        for (size_t i = 0; i < n; ++i) {
          if (MagnitudeKey(v[i]) >= threshold) want.push_back(static_cast<uint32_t>(i + 100));
        }
        for (size_t capacity : {want.size(), want.size() + 5, want.size() / 2, size_t{3}}) {
          std::vector<uint32_t> out(capacity + 2, 0xdeadbeef);
          ThresholdCollector collector(threshold, capacity, out.data(), path);
          const size_t half = n / 2;  // two scans, as a blocked pass makes them
          collector.Scan(v.data(), half, 100);
          collector.Scan(v.data() + half, n - half, 100 + half);
          ASSERT_EQ(collector.count(), want.size()) << n << " " << threshold;
          const size_t kept = std::min(capacity, want.size());
          EXPECT_EQ(std::vector<uint32_t>(out.begin(), out.begin() + kept),
                    std::vector<uint32_t>(want.begin(), want.begin() + kept))
              << n << " " << threshold << " " << capacity;
          EXPECT_EQ(out[capacity + 1], 0xdeadbeef) << "written past the capacity's slot";
        }
      }
    }
  }
}

TEST(TopKTest, CollectPathsIncludeScalarAndTheBestIsLast) {
  const std::vector<CollectPath> paths = AvailableCollectPaths();
  ASSERT_FALSE(paths.empty());
  EXPECT_EQ(paths.front(), CollectPath::kScalar);
  EXPECT_EQ(BestCollectPath(), paths.back());
}

// A first guess within the tolerance is taken in one pass and cut exactly at the guess; a guess
// far off falls back to sampling and still keeps the bounds; `chosen` says where the cut was.
TEST(TopKTest, FirstGuessIsTakenWhenWithinTheTolerance) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  std::vector<float> v(200000);
  for (float& x : v) x = normal(rng);
  const size_t k = 2000;
  const std::vector<uint32_t> exact = Exact(v, k);
  uint32_t kth = 0xffffffffu;
  for (uint32_t i : exact) kth = std::min(kth, MagnitudeKey(v[i]));
  std::vector<uint32_t> indices;
  uint32_t chosen = 0;
  TopKStats stats = SelectTopK(v.data(), v.size(), k, TopKOptions(), &indices, kth, &chosen);
  EXPECT_EQ(stats.passes, 1u);
  EXPECT_FALSE(stats.exact);
  EXPECT_EQ(chosen, kth);
  EXPECT_EQ(indices, exact);  // cut at the k-th magnitude: exactly the k largest (no ties here)

  const uint32_t far_off = MagnitudeKey(0.01f);  // most values clear it
  stats = SelectTopK(v.data(), v.size(), k, TopKOptions(), &indices, far_off, &chosen);
  EXPECT_GE(stats.passes, 2u);
  EXPECT_NE(chosen, far_off);
  EXPECT_GE(indices.size(), 1500u);
  EXPECT_LE(indices.size(), 2500u);
  for (uint32_t i : indices) EXPECT_GE(MagnitudeKey(v[i]), chosen);
}

}  // namespace
}  // namespace r2sp::codec
