// See epoch_samples.h.
#include "common/epoch_samples.h"

#include <algorithm>
#include <limits>

namespace r2sp {
namespace {

// Samples in shard `shard` of `world` over a data set of `n`.
int64_t ShardSize(int64_t n, int world, int shard) {
  return shard < n ? (n - shard + world - 1) / world : 0;
}

// Positions j in [0, size) with j mod parts == part.
int64_t ShareOf(int64_t size, int parts, int part) {
  return part < size ? (size - part + parts - 1) / parts : 0;
}

// Whether shard `s` is orphaned in an epoch of `live` (ascending).
bool Orphaned(const std::vector<int>& live, int s) {
  return !std::binary_search(live.begin(), live.end(), s);
}

}  // namespace

std::vector<int64_t> EpochSamples(int64_t dataset_size, int world, int shard,
                                  const std::vector<int>& live) {
  std::vector<int64_t> samples;
  for (int64_t i = shard; i < dataset_size; i += world) samples.push_back(i);
  const auto me = std::lower_bound(live.begin(), live.end(), shard);
  if (me == live.end() || *me != shard) return samples;
  const int parts = static_cast<int>(live.size());
  const int part = static_cast<int>(me - live.begin());
  for (int s = 0; s < world; ++s) {
    if (!Orphaned(live, s)) continue;
    for (int64_t j = part; s + j * world < dataset_size; j += parts) {
      samples.push_back(s + j * world);
    }
  }
  return samples;
}

int64_t FewestEpochSamples(int64_t dataset_size, int world, const std::vector<int>& live) {
  if (live.empty()) return 0;
  int64_t fewest = std::numeric_limits<int64_t>::max();
  const int parts = static_cast<int>(live.size());
  for (int part = 0; part < parts; ++part) {
    int64_t n = ShardSize(dataset_size, world, live[part]);
    for (int s = 0; s < world; ++s) {
      if (Orphaned(live, s)) n += ShareOf(ShardSize(dataset_size, world, s), parts, part);
    }
    fewest = std::min(fewest, n);
  }
  return fewest;
}

void OrderForEpoch(uint64_t seed, int epoch, int shard, bool shuffle, std::mt19937_64* rng,
                   std::vector<int64_t>* samples) {
  std::sort(samples->begin(), samples->end());
  rng->seed(seed * 1000003 + static_cast<uint64_t>(epoch) * 7919 + shard);
  if (shuffle) std::shuffle(samples->begin(), samples->end(), *rng);
}

}  // namespace r2sp
