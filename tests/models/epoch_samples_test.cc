// Tests for EpochSamples and FewestEpochSamples (models/data/epoch_samples.h): how an epoch's
// plan deals dead workers' shards out among the live ones.
#include "models/data/epoch_samples.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "models/data/batcher.h"
#include "models/data/dataset.h"

namespace r2sp::models {
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
TEST(EpochSamplesTest, TheBatcherTrainsThemFromTheNextEpoch) {
  Dataset d;
  d.shape = {1, 1, 1};
  for (int i = 0; i < 30; ++i) {
    d.labels.push_back(i % 10);
    d.pixels.push_back(static_cast<uint8_t>(i));
  }
  Batcher b(&d, {0, 3, 9, true, false});
  std::vector<float> images(15);
  std::vector<int32_t> labels(15);
  // Epoch 0 trains the worker's own shard: samples 0, 3, ..., 27.
  b.StartEpoch(0);
  ASSERT_EQ(b.Next(15, images.data(), labels.data()), 10);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(static_cast<int64_t>(images[i] * 255.0f + 0.5f) % 3, 0);
  const std::vector<int64_t> samples = EpochSamples(30, 3, 0, {0, 2});
  b.SetSamples(samples);
  b.StartEpoch(1);
  ASSERT_EQ(b.Next(15, images.data(), labels.data()), 15);
  EXPECT_EQ(b.Next(1, images.data(), labels.data()), 0);
  std::set<int64_t> got;
  for (float v : images) got.insert(static_cast<int64_t>(v * 255.0f + 0.5f));
  EXPECT_EQ(got, std::set<int64_t>(samples.begin(), samples.end()));
  // A worker the plan did not count goes round its own samples as long as the steps last.
  b.SetSamples(EpochSamples(30, 3, 1, {0, 2}), /*wrap=*/true);
  b.StartEpoch(2);
  EXPECT_EQ(b.Next(15, images.data(), labels.data()), 15);
  for (float v : images) EXPECT_EQ(static_cast<int64_t>(v * 255.0f + 0.5f) % 3, 1);
}

}  // namespace
}  // namespace r2sp::models
