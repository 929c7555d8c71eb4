// See dataset.h.
#include "models/data/dataset.h"

#include <sys/stat.h>
#include <zlib.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace r2sp::models {
namespace {

constexpr uint32_t kIdxImages = 0x00000803;
constexpr uint32_t kIdxLabels = 0x00000801;
constexpr int64_t kMaxFileBytes = int64_t{4} << 30;

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// The whole (decompressed) contents of a file; gzread reads uncompressed files as they are.
absl::StatusOr<std::string> ReadMaybeGzip(const std::string& path) {
  if (!Exists(path)) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::unique_ptr<gzFile_s, int (*)(gzFile)> closer(f, gzclose);
  std::string out;
  char buffer[1 << 16];
  while (true) {
    const int got = gzread(f, buffer, sizeof(buffer));
    if (got < 0) {
      int code = 0;
      const char* what = gzerror(f, &code);
      return absl::DataLossError(absl::StrCat(path, ": corrupt or truncated gzip data (", what, ")"));
    }
    if (got == 0) break;
    out.append(buffer, got);
    if (static_cast<int64_t>(out.size()) > kMaxFileBytes) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": larger than 4 GiB"));
    }
  }
  // A gzip stream cut short reads as a clean end of file; zlib only reports it here.
  int code = Z_OK;
  const char* what = gzerror(f, &code);
  if (code != Z_OK && code != Z_STREAM_END) {
    return absl::DataLossError(absl::StrCat(path, ": truncated or corrupt gzip data (", what, ")"));
  }
  if (!gzeof(f)) return absl::DataLossError(absl::StrCat(path, ": read stopped early"));
  return out;
}

uint32_t BigEndian32(std::string_view s, size_t at) {
  return (uint32_t{static_cast<uint8_t>(s[at])} << 24) |
         (uint32_t{static_cast<uint8_t>(s[at + 1])} << 16) |
         (uint32_t{static_cast<uint8_t>(s[at + 2])} << 8) | uint32_t{static_cast<uint8_t>(s[at + 3])};
}

}  // namespace

absl::StatusOr<Dataset> LoadIdx(const std::string& images_path, const std::string& labels_path) {
  R2SP_ASSIGN_OR_RETURN(const std::string images, ReadMaybeGzip(images_path));
  R2SP_ASSIGN_OR_RETURN(const std::string labels, ReadMaybeGzip(labels_path));
  return ParseIdx(images, labels, images_path, labels_path);
}

absl::StatusOr<Dataset> ParseIdx(std::string_view images, std::string_view labels,
                                 const std::string& images_path, const std::string& labels_path) {
  if (images.size() < 16 || BigEndian32(images, 0) != kIdxImages) {
    return absl::InvalidArgumentError(absl::StrCat(
        images_path, ": not an idx image file (expected magic 0x00000803 and a 16-byte header)"));
  }
  if (labels.size() < 8 || BigEndian32(labels, 0) != kIdxLabels) {
    return absl::InvalidArgumentError(absl::StrCat(
        labels_path, ": not an idx label file (expected magic 0x00000801 and an 8-byte header)"));
  }
  const uint32_t count = BigEndian32(images, 4);
  const uint32_t rows = BigEndian32(images, 8), cols = BigEndian32(images, 12);
  if (rows == 0 || cols == 0 || rows > 4096 || cols > 4096) {
    return absl::InvalidArgumentError(absl::StrCat(images_path, ": bad image size ", rows, "x", cols));
  }
  const uint64_t want = 16 + uint64_t{count} * rows * cols;
  if (images.size() != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        images_path, ": header says ", count, " images of ", rows, "x", cols, " (", want,
        " bytes) but the file has ", images.size(), " bytes"));
  }
  const uint32_t label_count = BigEndian32(labels, 4);
  if (labels.size() != 8 + uint64_t{label_count}) {
    return absl::InvalidArgumentError(absl::StrCat(labels_path, ": header says ", label_count,
                                                   " labels but the file has ",
                                                   labels.size() - 8, " label bytes"));
  }
  if (label_count != count) {
    return absl::InvalidArgumentError(absl::StrCat(labels_path, " has ", label_count,
                                                   " labels but ", images_path, " has ", count,
                                                   " images"));
  }
  Dataset d;
  d.shape = {1, static_cast<int>(rows), static_cast<int>(cols)};
  d.pixels.assign(images.begin() + 16, images.end());
  d.labels.resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    const int32_t label = static_cast<uint8_t>(labels[8 + i]);
    if (label >= d.num_classes) {
      return absl::InvalidArgumentError(
          absl::StrCat(labels_path, ": label ", label, " of item ", i, " is not in 0..9"));
    }
    d.labels[i] = label;
  }
  return d;
}

absl::StatusOr<Dataset> LoadCifarBatches(const std::vector<std::string>& paths) {
  Dataset d;
  d.name = "cifar10";
  d.shape = {3, 32, 32};
  for (const std::string& path : paths) {
    R2SP_ASSIGN_OR_RETURN(const std::string bytes, ReadMaybeGzip(path));
    R2SP_RETURN_IF_ERROR(ParseCifarBatch(bytes, path, &d));
  }
  d.mean = {0.4914f, 0.4822f, 0.4465f};
  d.stddev = {0.2470f, 0.2435f, 0.2616f};
  return d;
}

absl::Status ParseCifarBatch(std::string_view bytes, const std::string& path, Dataset* d) {
  constexpr size_t kRecord = 1 + 3 * 32 * 32;
  if (bytes.empty() || bytes.size() % kRecord != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", bytes.size(), " bytes is not a whole number of 3073-byte CIFAR-10 records"));
  }
  const size_t records = bytes.size() / kRecord;
  for (size_t r = 0; r < records; ++r) {
    const char* rec = bytes.data() + r * kRecord;
    const int32_t label = static_cast<uint8_t>(rec[0]);
    if (label >= d->num_classes) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": record ", r, " has label ", label, ", not in 0..9"));
    }
    d->labels.push_back(label);
    d->pixels.insert(d->pixels.end(), rec + 1, rec + kRecord);
  }
  return absl::OkStatus();
}

absl::StatusOr<TrainTest> LoadDataset(const std::string& name, const std::string& dir) {
  TrainTest tt;
  if (name == "fashion-mnist" || name == "mnist") {
    auto path = [&dir](const std::string& stem) {
      const std::string plain = absl::StrCat(dir, "/", stem);
      return Exists(plain) ? plain : plain + ".gz";
    };
    R2SP_ASSIGN_OR_RETURN(
        tt.train, LoadIdx(path("train-images-idx3-ubyte"), path("train-labels-idx1-ubyte")));
    R2SP_ASSIGN_OR_RETURN(
        tt.test, LoadIdx(path("t10k-images-idx3-ubyte"), path("t10k-labels-idx1-ubyte")));
    const bool fashion = name == "fashion-mnist";
    for (Dataset* d : {&tt.train, &tt.test}) {
      d->name = name;
      d->mean = {fashion ? 0.2860f : 0.1307f};
      d->stddev = {fashion ? 0.3530f : 0.3081f};
    }
  } else if (name == "cifar10") {
    std::vector<std::string> train_files;
    for (int i = 1; i <= 5; ++i) train_files.push_back(absl::StrCat(dir, "/data_batch_", i, ".bin"));
    R2SP_ASSIGN_OR_RETURN(tt.train, LoadCifarBatches(train_files));
    R2SP_ASSIGN_OR_RETURN(tt.test, LoadCifarBatches({absl::StrCat(dir, "/test_batch.bin")}));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown data set '", name, "' (fashion-mnist, mnist, cifar10)"));
  }
  return tt;
}

}  // namespace r2sp::models
