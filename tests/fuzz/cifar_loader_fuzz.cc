// Fuzz target: the CIFAR-10 binary-batch parser behind the loader (models/data/dataset.h
// ParseCifarBatch, on contents LoadCifarBatches has read), then augmented batches of what it
// accepts. Input: one batch file.
#include <cstdint>
#include <string>
#include <vector>

#include "glog/logging.h"
#include "models/data/batcher.h"
#include "models/data/dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace r2sp;
  models::Dataset d;
  d.shape = {3, 32, 32};
  d.mean = {0.5f, 0.5f, 0.5f};
  d.stddev = {0.25f, 0.25f, 0.25f};
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (!models::ParseCifarBatch(bytes, "batch", &d).ok()) return 0;
  CHECK_EQ(d.pixels.size(), static_cast<size_t>(d.size() * d.shape.size()));
  for (int32_t label : d.labels) CHECK(label >= 0 && label < d.num_classes);
  models::BatcherOptions options;
  options.augment = true;
  models::Batcher batcher(&d, options);
  std::vector<float> batch(2 * d.shape.size());
  std::vector<int32_t> labels(2);
  CHECK_EQ(batcher.NextWrapping(2, batch.data(), labels.data()), 2);
  return 0;
}
