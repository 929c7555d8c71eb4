// An image-classification data set in memory (uint8 pixels, NCHW per image, int labels) and
// the loaders for the formats we read: idx (MNIST, Fashion-MNIST; gzip-compressed or not)
// and CIFAR-10's binary batches. Every malformed input is an error naming the file and what
// is wrong with it.
#ifndef R2SP_MODELS_DATA_DATASET_H_
#define R2SP_MODELS_DATA_DATASET_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "models/graph.h"

namespace r2sp::models {

struct Dataset {
  std::string name;
  Shape shape;                  // per image
  int num_classes = 10;
  std::vector<uint8_t> pixels;  // size() * shape.size() bytes, NCHW per image
  std::vector<int32_t> labels;
  // Per-channel normalisation applied when batches are built: (x / 255 - mean) / std.
  std::vector<float> mean, stddev;

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

struct TrainTest {
  Dataset train, test;
};

// Reads an idx image file (magic 0x00000803) and label file (0x00000801), either gzip-compressed
// or raw. Sizes must agree with the headers and with each other.
absl::StatusOr<Dataset> LoadIdx(const std::string& images_path, const std::string& labels_path);

// Reads CIFAR-10 binary batches (records of 1 label byte + 3072 pixel bytes).
absl::StatusOr<Dataset> LoadCifarBatches(const std::vector<std::string>& paths);

// The parsers behind the loaders, on contents already read (and decompressed); the paths only
// name the files in errors. ParseCifarBatch appends one batch's records to `d` (after an error,
// perhaps some of them).
absl::StatusOr<Dataset> ParseIdx(std::string_view images, std::string_view labels,
                                 const std::string& images_path, const std::string& labels_path);
absl::Status ParseCifarBatch(std::string_view bytes, const std::string& path, Dataset* d);

// "fashion-mnist" or "mnist" from DIR/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz];
// "cifar10" from DIR/data_batch_{1..5}.bin and DIR/test_batch.bin.
absl::StatusOr<TrainTest> LoadDataset(const std::string& name, const std::string& dir);

// Where Debian's dataset-fashion-mnist package puts the files.
inline constexpr char kDebianFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

}  // namespace r2sp::models

#endif  // R2SP_MODELS_DATA_DATASET_H_
