// Turns a worker's shard of a Dataset into normalised float batches: the shard is every
// world-th sample starting at rank, reshuffled each epoch from (seed, epoch, rank); CIFAR-style
// augmentation (random crop after 4-pixel zero padding, horizontal flip) when asked.
#ifndef R2SP_MODELS_DATA_BATCHER_H_
#define R2SP_MODELS_DATA_BATCHER_H_

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "common/epoch_samples.h"
#include "models/data/dataset.h"

namespace r2sp::models {

struct BatcherOptions {
  int rank = 0;
  int world = 1;  // REQUIRES: 0 <= rank < world
  uint64_t seed = 1;
  bool shuffle = true;
  bool augment = false;  // random crop (pad 4) + horizontal flip
};

// Not thread-safe. `data` (borrowed) outlives the batcher.
class Batcher {
 public:
  Batcher(const Dataset* data, const BatcherOptions& options);

  // Trains `samples` (indices into the data set) from the next StartEpoch on, instead of the
  // shard: an epoch in which this worker takes over part of dead workers' shards
  // (common/epoch_samples.h). `wrap`: Next goes on as NextWrapping at the end of them, for a worker
  // that must run more steps than its samples fill (one an epoch's plan did not count).
  void SetSamples(std::vector<int64_t> samples, bool wrap = false) {
    order_ = std::move(samples);
    wrap_ = wrap;
  }
  // Reorders the shard for `epoch` and rewinds.
  void StartEpoch(int epoch);
  // Fills up to `batch` samples (images NCHW floats, labels); returns how many (0 at the end
  // of the epoch; see SetSamples for the exception).
  int Next(int batch, float* images, int32_t* labels);
  // Like Next, but always fills `batch` samples: at the end of the shard it reshuffles (the
  // next epoch of an internal count) and goes on. For batch sizes that change per step.
  int NextWrapping(int batch, float* images, int32_t* labels);
  // Passes over `samples` samples as Next (or, `wrapping`, NextWrapping) would have taken
  // them (a resumed job starting mid-epoch).
  void Skip(int64_t samples, bool wrapping);

  // Writes sample `index` of `data`, normalised (and augmented with `rng` if not null).
  static void Normalise(const Dataset& data, int64_t index, std::mt19937_64* rng, float* out);

 private:
  // Next without wrapping.
  int Take(int batch, float* images, int32_t* labels);

  const Dataset* data_;
  const BatcherOptions options_;
  std::vector<int64_t> order_;
  size_t cursor_ = 0;
  int epoch_ = 0;
  bool wrap_ = false;
  std::mt19937_64 rng_;
};

}  // namespace r2sp::models

#endif  // R2SP_MODELS_DATA_BATCHER_H_
