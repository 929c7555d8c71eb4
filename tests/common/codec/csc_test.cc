// Coarse-grained chunks: the chunk geometry (with a short last chunk), how many chunks a ratio
// sends, and SelectChunks against a sort-by-norm reference (ties to the lowest ids, NaN and Inf
// chunks first).
#include "common/codec/csc.h"

#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace r2sp::codec {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<uint32_t> Select(const std::vector<float>& v, uint32_t chunk, size_t count) {
  std::vector<uint32_t> ids = {5, 5, 5, 5};  // overwritten
  SelectChunks(v.data(), v.size(), chunk, count, &ids);
  return ids;
}

// The `count` chunks with the largest norms (in double), ties to the lowest ids, by id.
std::vector<uint32_t> Reference(const std::vector<float>& v, uint32_t chunk, size_t count) {
  const size_t chunks = (v.size() + chunk - 1) / chunk;
  std::vector<double> norms(chunks, 0.0);
  for (size_t i = 0; i < v.size(); ++i) norms[i / chunk] += double(v[i]) * double(v[i]);
  std::vector<uint32_t> ids(chunks);
  for (size_t c = 0; c < chunks; ++c) ids[c] = static_cast<uint32_t>(c);
  std::sort(ids.begin(), ids.end(), [&norms](uint32_t a, uint32_t b) {
    return norms[a] > norms[b] || (norms[a] == norms[b] && a < b);
  });
  ids.resize(std::min(count, chunks));
  std::sort(ids.begin(), ids.end());
  return ids;
}

// The fused pass of error feedback's add and the chunk norm gives the two-pass result exactly:
// the same residual and the same float norm, whatever the length's remainder mod 8.
TEST(CscTest, AddIntoAndSquaredNormMatchesAddThenNormBitForBit) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{33},
                   size_t{1000}, size_t{32768}}) {
    std::vector<float> g(n), acc(n);
    for (size_t i = 0; i < n; ++i) g[i] = normal(rng), acc[i] = normal(rng);
    std::vector<float> two_pass = acc;
    for (size_t i = 0; i < n; ++i) two_pass[i] += g[i];
    const float want = ChunkSquaredNorm(two_pass.data(), n);
    const float got = AddIntoAndSquaredNorm(g.data(), acc.data(), n);
    EXPECT_EQ(got, want) << n;
    EXPECT_EQ(acc, two_pass) << n;
  }
}

TEST(CscTest, ChunkGeometry) {
  EXPECT_EQ(NumChunks(0, 4), 0u);
  EXPECT_EQ(NumChunks(1, 4), 1u);
  EXPECT_EQ(NumChunks(8, 4), 2u);
  EXPECT_EQ(NumChunks(9, 4), 3u);
  EXPECT_EQ(NumChunks(5, 1), 5u);
  EXPECT_EQ(NumChunks(100000, 32768), 4u);

  EXPECT_EQ(ChunkLength(9, 4, 0), 4u);
  EXPECT_EQ(ChunkLength(9, 4, 1), 4u);
  EXPECT_EQ(ChunkLength(9, 4, 2), 1u);  // the short last chunk
  EXPECT_EQ(ChunkLength(8, 4, 1), 4u);  // a full last chunk
  EXPECT_EQ(ChunkLength(3, 4, 0), 3u);  // a single short chunk
  EXPECT_EQ(ChunkLength(100000, 32768, 3), 100000u - 3 * 32768u);

  // The lengths tile the gradient.
  for (size_t n : {1, 7, 64, 65, 1000}) {
    for (uint32_t chunk : {1u, 3u, 64u, 2000u}) {
      size_t total = 0;
      for (size_t c = 0; c < NumChunks(n, chunk); ++c) {
        EXPECT_GE(ChunkLength(n, chunk, c), 1u);
        total += ChunkLength(n, chunk, c);
      }
      EXPECT_EQ(total, n) << "n=" << n << " chunk=" << chunk;
    }
  }
}

TEST(CscTest, SelectsLargestNormsLikeTheReference) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> small(-3, 3);  // exact norms, many ties
  for (size_t n : {1, 5, 37, 100, 1000, 1003}) {
    for (uint32_t chunk : {1u, 4u, 10u, 64u}) {
      std::vector<float> v(n);
      for (float& x : v) x = static_cast<float>(small(rng));
      const size_t chunks = NumChunks(n, chunk);
      for (size_t count : {size_t{0}, size_t{1}, chunks / 2, chunks - 1, chunks, chunks + 3}) {
        EXPECT_EQ(Select(v, chunk, count), Reference(v, chunk, count))
            << "n=" << n << " chunk=" << chunk << " count=" << count;
      }
    }
  }
  // Real-valued data: norms are far apart compared with float rounding.
  std::normal_distribution<float> normal;
  std::vector<float> v(100000);
  for (float& x : v) x = normal(rng);
  for (size_t count : {1, 5, 20, 390}) {
    EXPECT_EQ(Select(v, 256, count), Reference(v, 256, count)) << "count=" << count;
  }
}

TEST(CscTest, IdsIncreaseAndCountIsHonoured) {
  std::mt19937 rng(8);
  std::normal_distribution<float> normal;
  std::vector<float> v(50000);
  for (float& x : v) x = normal(rng);
  for (size_t count : {1, 7, 48}) {
    const std::vector<uint32_t> ids = Select(v, 1024, count);
    ASSERT_EQ(ids.size(), count);
    for (size_t j = 1; j < ids.size(); ++j) EXPECT_LT(ids[j - 1], ids[j]);
    EXPECT_LT(ids.back(), NumChunks(v.size(), 1024));
  }
}

TEST(CscTest, TiesGoToLowestIds) {
  // Chunks of 2: norms 1, 1, 1, 0, 25, 25.
  const std::vector<float> v = {1, 0, 0, 1, -1, 0, 0, 0, 3, 4, 5, 0};
  EXPECT_EQ(Select(v, 2, 1), (std::vector<uint32_t>{4}));
  EXPECT_EQ(Select(v, 2, 2), (std::vector<uint32_t>{4, 5}));
  EXPECT_EQ(Select(v, 2, 3), (std::vector<uint32_t>{0, 4, 5}));
  EXPECT_EQ(Select(v, 2, 4), (std::vector<uint32_t>{0, 1, 4, 5}));
  EXPECT_EQ(Select(std::vector<float>(12, 0.0f), 4, 2), (std::vector<uint32_t>{0, 1}));
}

TEST(CscTest, CountAtOrPastChunksSelectsAll) {
  const std::vector<float> v = {0, 0, 0, 0, 0, 1, 0};
  EXPECT_EQ(Select(v, 3, 3), (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(Select(v, 3, 100), (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_TRUE(Select(v, 3, 0).empty());
  EXPECT_TRUE(Select({}, 3, 1).empty());
}

TEST(CscTest, ShortLastChunkCompetesOnItsNorm) {
  std::vector<float> v(10, 1.0f);  // chunks of 4: norms 4, 4, and the last (2 values) 2
  EXPECT_EQ(Select(v, 4, 1), (std::vector<uint32_t>{0}));
  v[9] = 10.0f;  // last chunk: 101
  EXPECT_EQ(Select(v, 4, 1), (std::vector<uint32_t>{2}));
  EXPECT_EQ(Select(v, 4, 2), (std::vector<uint32_t>{0, 2}));
}

TEST(CscTest, NonFiniteChunksComeFirst) {
  // Chunk 0 huge but finite (norm 4e36), chunk 2 holds Inf, chunk 3 NaN.
  std::vector<float> v(20, 1.0f);
  for (int i = 0; i < 4; ++i) v[i] = 1e18f;
  v[10] = -kInf;
  v[13] = kNaN;
  EXPECT_EQ(Select(v, 4, 2), (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(Select(v, 4, 3), (std::vector<uint32_t>{0, 2, 3}));
  v[10] = 0.0f;
  EXPECT_EQ(Select(v, 4, 1), (std::vector<uint32_t>{3}));  // a NaN outranks any finite norm
  v[13] = 1.0f;
  v[19] = kInf;  // in the last chunk
  EXPECT_EQ(Select(v, 4, 1), (std::vector<uint32_t>{4}));
}

// The chunks holding anything but zeros (-0 is zero, NaN is not), the short last one too; more
// than `most` of them stops the selection.
TEST(CscTest, SelectNonzeroChunksFindsTheChunksThatHoldAValue) {
  std::vector<float> v(10, 0.0f);  // chunks of 3: [0,3) [3,6) [6,9) [9,10)
  v[4] = -0.0f;
  v[7] = kNaN;
  v[9] = 1e-30f;
  std::vector<uint32_t> ids = {7, 7};
  EXPECT_TRUE(SelectNonzeroChunks(v.data(), v.size(), 3, /*most=*/4, &ids));
  EXPECT_EQ(ids, (std::vector<uint32_t>{2, 3}));
  EXPECT_TRUE(SelectNonzeroChunks(v.data(), v.size(), 3, /*most=*/2, &ids));
  EXPECT_EQ(ids, (std::vector<uint32_t>{2, 3}));
  v[0] = 2.0f;
  EXPECT_FALSE(SelectNonzeroChunks(v.data(), v.size(), 3, /*most=*/2, &ids));
  const std::vector<float> zeros(10, 0.0f);
  EXPECT_TRUE(SelectNonzeroChunks(zeros.data(), zeros.size(), 3, /*most=*/0, &ids));
  EXPECT_EQ(ids, (std::vector<uint32_t>{}));
}

}  // namespace
}  // namespace r2sp::codec
