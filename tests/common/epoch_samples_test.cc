// Tests for EpochSamples and FewestEpochSamples (common/epoch_samples.h): how an epoch's
// plan deals dead workers' shards out among the live ones.
#include "common/epoch_samples.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace r2sp {
namespace {

// Every sample of a `n`-sample data set in `world` shards trained exactly once in an epoch of
// `live`; each live shard keeps its own; the fewest count is the smallest load.
void ExpectEveryoneOnce(int64_t n, int world, const std::vector<int>& live) {
  std::vector<int> seen(n, 0);
  int64_t fewest = n + 1;
  for (int shard : live) {
    const std::vector<int64_t> mine = EpochSamples(n, world, shard, live);
    for (int64_t i = shard; i < n; i += world) {
      EXPECT_TRUE(std::find(mine.begin(), mine.end(), i) != mine.end())
          << "shard " << shard << " lost its own sample " << i;
    }
    for (int64_t i : mine) ++seen[i];
    fewest = std::min<int64_t>(fewest, static_cast<int64_t>(mine.size()));
  }
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(seen[i], 1) << "sample " << i;
  EXPECT_EQ(FewestEpochSamples(n, world, live), fewest);
}

TEST(EpochSamplesTest, WithEveryShardLiveEachTrainsItsOwn) {
  for (int shard = 0; shard < 3; ++shard) {
    std::vector<int64_t> own;
    for (int64_t i = shard; i < 100; i += 3) own.push_back(i);
    EXPECT_EQ(EpochSamples(100, 3, shard, {0, 1, 2}), own);
  }
  ExpectEveryoneOnce(100, 3, {0, 1, 2});
  // As the fixed-shard worker counted before: the smallest shard.
  EXPECT_EQ(FewestEpochSamples(100, 3, {0, 1, 2}), 33);
  EXPECT_EQ(FewestEpochSamples(60000, 3, {0, 1, 2}), 20000);
}

TEST(EpochSamplesTest, OrphanedShardsAreDealtOutOnceAndEvenly) {
  ExpectEveryoneOnce(100, 3, {0, 2});
  ExpectEveryoneOnce(101, 4, {1});
  ExpectEveryoneOnce(997, 7, {0, 3, 4, 6});
  ExpectEveryoneOnce(5, 8, {6, 7});  // fewer samples than shards
  // 60000 samples, one of three workers dead: each survivor trains half of them, as a job of
  // two would.
  EXPECT_EQ(FewestEpochSamples(60000, 3, {0, 2}), 30000);
  EXPECT_EQ(EpochSamples(60000, 3, 2, {0, 2}).size(), 30000u);
  // Loads differ by at most one sample per orphaned shard.
  const std::vector<int> live = {1, 2, 5};
  size_t most = 0, least = 1000;
  for (int shard : live) {
    const size_t n = EpochSamples(1000, 6, shard, live).size();
    most = std::max(most, n);
    least = std::min(least, n);
  }
  EXPECT_LE(most - least, 3u + 1u);  // 3 orphaned shards; the shards themselves differ by 1
}

TEST(EpochSamplesTest, AShardTheTableLeftOutTrainsItsOwnAndNothingElse) {
  const std::vector<int64_t> mine = EpochSamples(30, 3, 1, {0, 2});
  EXPECT_EQ(mine.size(), 10u);
  for (int64_t i : mine) EXPECT_EQ(i % 3, 1);
  EXPECT_EQ(FewestEpochSamples(30, 3, {}), 0);
}

// The batcher trains the dealt-out samples from the next epoch on, reshuffled.
TEST(OrderForEpochTest, SortsThenShufflesBySeedEpochAndShard) {
  std::mt19937_64 rng;
  std::vector<int64_t> unshuffled = {5, 1, 3};
  OrderForEpoch(1, 0, 0, /*shuffle=*/false, &rng, &unshuffled);
  EXPECT_EQ(unshuffled, (std::vector<int64_t>{1, 3, 5}));
  std::vector<int64_t> samples(100);
  for (int i = 0; i < 100; ++i) samples[i] = 99 - i;
  std::vector<int64_t> a = samples, again = samples, other_epoch = samples;
  OrderForEpoch(7, 2, 1, true, &rng, &a);
  OrderForEpoch(7, 2, 1, true, &rng, &again);
  OrderForEpoch(7, 3, 1, true, &rng, &other_epoch);
  EXPECT_EQ(a, again);
  EXPECT_NE(a, other_epoch);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> all(100);
  for (int i = 0; i < 100; ++i) all[i] = i;
  EXPECT_EQ(sorted, all);
}

}  // namespace
}  // namespace r2sp
