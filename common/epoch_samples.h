// Which samples a worker trains in an epoch when some workers died (the scheduler's
// --absorb_orphaned_shards, proto EpochPlan). The data set is cut into `world` shards (shard s:
// every world-th sample from s). The epoch's plan lists the shards that have a live worker, in
// ascending order; each trains its own shard, and every other (orphaned) shard is dealt out
// among them: the sample at position j of an orphaned shard goes to the (j mod L)-th live shard
// (L of them). So an epoch visits every sample once, and the live workers' loads differ by at
// most one sample per orphaned shard. And the order a worker visits its samples in, which the
// C++ worker's Batcher and the Python client's sampler share.
#ifndef R2SP_COMMON_EPOCH_SAMPLES_H_
#define R2SP_COMMON_EPOCH_SAMPLES_H_

#include <cstdint>
#include <random>
#include <vector>

namespace r2sp {

// The samples (indices into the data set of `dataset_size`) that shard `shard` trains in an
// epoch whose live shards are `live` (ascending): its own, in ascending order, then its share
// of the orphaned ones. A shard not in `live` (a worker the plan did not count) trains its own.
// REQUIRES: 0 <= shard < world; `live` passes CheckLiveShards (common/live_shards.h).
std::vector<int64_t> EpochSamples(int64_t dataset_size, int world, int shard,
                                  const std::vector<int>& live);

// The fewest samples any live shard trains in that epoch (0 if `live` is empty). With a fixed
// batch, every worker runs this many samples / batch steps, so that clocks line up.
int64_t FewestEpochSamples(int64_t dataset_size, int world, const std::vector<int>& live);

// The order an epoch of shard `shard` visits `samples` in: sorted, then (with `shuffle`)
// shuffled by (seed, epoch, shard) with `rng`, which stays seeded for the epoch's augmentation.
void OrderForEpoch(uint64_t seed, int epoch, int shard, bool shuffle, std::mt19937_64* rng,
                   std::vector<int64_t>* samples);

}  // namespace r2sp

#endif  // R2SP_COMMON_EPOCH_SAMPLES_H_
