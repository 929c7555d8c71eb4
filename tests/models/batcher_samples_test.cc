// The Batcher trains the samples an epoch plan gives it (common/epoch_samples.h) from the next
// epoch on, and a worker the plan did not count goes round its own.
#include <cstdint>
#include <set>
#include <vector>

#include "common/epoch_samples.h"
#include "gtest/gtest.h"
#include "models/data/batcher.h"
#include "models/data/dataset.h"

namespace r2sp::models {
namespace {

TEST(BatcherSamplesTest, TheBatcherTrainsThemFromTheNextEpoch) {
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
