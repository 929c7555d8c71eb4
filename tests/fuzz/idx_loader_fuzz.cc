// Fuzz target: the idx parser behind the MNIST / Fashion-MNIST loader (models/data/dataset.h
// ParseIdx, on contents LoadIdx has read and decompressed), then batches of what it accepts.
// Input: the image file as a chunk (fuzz_input.h), the rest the label file.
#include <cstdint>
#include <string>
#include <vector>

#include "glog/logging.h"
#include "models/data/batcher.h"
#include "models/data/dataset.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace r2sp;
  fuzz::FuzzInput in(data, size);
  const std::string_view images = in.Chunk();
  const std::string_view labels = in.Rest();
  absl::StatusOr<models::Dataset> d = models::ParseIdx(images, labels, "images", "labels");
  if (!d.ok()) return 0;
  const int64_t per_image = d->shape.size();
  CHECK_EQ(d->pixels.size(), static_cast<size_t>(d->size() * per_image));
  for (int32_t label : d->labels) CHECK(label >= 0 && label < d->num_classes);
  if (d->size() == 0 || per_image > (1 << 16)) return 0;  // batches of huge images: too slow
  models::Batcher batcher(&*d, models::BatcherOptions{});
  std::vector<float> batch(4 * per_image);
  std::vector<int32_t> batch_labels(4);
  CHECK_EQ(batcher.NextWrapping(4, batch.data(), batch_labels.data()), 4);
  return 0;
}
