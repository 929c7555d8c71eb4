// Loaders on generated files in the exact formats (idx raw and gzip, CIFAR-10 binary), every
// malformed-file case, the real Fashion-MNIST from Debian's package, and the batcher.
#include "models/data/dataset.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cmath>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "models/data/batcher.h"

namespace r2sp::models {
namespace {

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

void Put32(std::string& s, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>((v >> shift) & 0xff));
}

std::string IdxImages(uint32_t count, uint32_t rows, uint32_t cols, uint32_t magic = 0x803) {
  std::string s;
  Put32(s, magic);
  Put32(s, count);
  Put32(s, rows);
  Put32(s, cols);
  for (uint32_t i = 0; i < count * rows * cols; ++i) s.push_back(static_cast<char>(i % 251));
  return s;
}

std::string IdxLabels(uint32_t count, uint32_t magic = 0x801) {
  std::string s;
  Put32(s, magic);
  Put32(s, count);
  for (uint32_t i = 0; i < count; ++i) s.push_back(static_cast<char>(i % 10));
  return s;
}

std::string Write(const std::string& name, const std::string& bytes, bool gzip = false) {
  const std::string path = absl::StrCat(TempDir(), "/", name);
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(path, std::ios::binary) << bytes;
  }
  return path;
}

std::string ReadRaw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(DatasetTest, IdxRoundTripRawAndGzip) {
  for (bool gz : {false, true}) {
    const std::string images = Write(gz ? "i.gz" : "i", IdxImages(7, 3, 4), gz);
    const std::string labels = Write(gz ? "l.gz" : "l", IdxLabels(7), gz);
    absl::StatusOr<Dataset> d = LoadIdx(images, labels);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->size(), 7);
    EXPECT_EQ(d->shape, (Shape{1, 3, 4}));
    EXPECT_EQ(d->pixels.size(), 7u * 12);
    EXPECT_EQ(d->pixels[13], 13);
    EXPECT_EQ(d->labels[6], 6);
  }
}

void ExpectIdxError(const std::string& images, const std::string& labels,
                    const std::string& file_named, const std::string& what) {
  absl::StatusOr<Dataset> d = LoadIdx(images, labels);
  ASSERT_FALSE(d.ok());
  const std::string message(d.status().message());
  EXPECT_NE(message.find(file_named), std::string::npos) << message;
  EXPECT_NE(message.find(what), std::string::npos) << message;
}

TEST(DatasetTest, MalformedIdxFilesAreClearErrors) {
  const std::string good_images = Write("gi", IdxImages(5, 2, 2));
  const std::string good_labels = Write("gl", IdxLabels(5));
  ExpectIdxError(TempDir() + "/missing", good_labels, "missing", "no such file");
  ExpectIdxError(Write("bad_magic", IdxImages(5, 2, 2, 0x1234)), good_labels, "bad_magic",
                 "magic");
  ExpectIdxError(good_images, Write("bad_lmagic", IdxLabels(5, 0x803)), "bad_lmagic", "magic");
  std::string truncated = IdxImages(5, 2, 2);
  truncated.resize(truncated.size() - 3);
  ExpectIdxError(Write("truncated", truncated), good_labels, "truncated", "header says 5 images");
  ExpectIdxError(good_images, Write("fewer", IdxLabels(4)), "fewer", "has 4 labels");
  std::string bad_label = IdxLabels(5);
  bad_label[9] = 42;
  ExpectIdxError(good_images, Write("bad_label", bad_label), "bad_label", "label 42");
  ExpectIdxError(Write("tiny", "abc"), good_labels, "tiny", "not an idx image file");
  // A gzip stream cut in half.
  const std::string gz = Write("whole.gz", IdxImages(500, 8, 8), true);
  std::string half = ReadRaw(gz);
  half.resize(half.size() / 2);
  ExpectIdxError(Write("half.gz", half), good_labels, "half.gz", "truncated");
}

TEST(DatasetTest, CifarBatchesRoundTripAndErrors) {
  std::string records;
  for (int r = 0; r < 3; ++r) {
    records.push_back(static_cast<char>(r + 2));
    for (int i = 0; i < 3072; ++i) records.push_back(static_cast<char>((i + r) % 256));
  }
  const std::string a = Write("data_batch_a.bin", records);
  const std::string b = Write("data_batch_b.bin", records.substr(0, 3073));
  absl::StatusOr<Dataset> d = LoadCifarBatches({a, b});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->size(), 4);
  EXPECT_EQ(d->shape, (Shape{3, 32, 32}));
  EXPECT_EQ(d->labels, (std::vector<int32_t>{2, 3, 4, 2}));
  EXPECT_EQ(d->pixels[3072 + 5], 6);

  absl::StatusOr<Dataset> bad = LoadCifarBatches({Write("short.bin", records.substr(0, 5000))});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("short.bin"), std::string::npos);
  EXPECT_NE(bad.status().message().find("3073-byte"), std::string::npos);
  std::string bad_label = records;
  bad_label[3073] = 10;
  bad = LoadCifarBatches({Write("label.bin", bad_label)});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("record 1 has label 10"), std::string::npos);
  EXPECT_FALSE(LoadCifarBatches({TempDir() + "/nope.bin"}).ok());
}

TEST(DatasetTest, LoadDatasetFindsTheFilesAndRejectsUnknownNames) {
  const std::string dir = TempDir() + "/cifar";
  std::string records(3073 * 2, '\x01');
  mkdir(dir.c_str(), 0755);
  for (int i = 1; i <= 5; ++i) Write(absl::StrCat("cifar/data_batch_", i, ".bin"), records);
  Write("cifar/test_batch.bin", records);
  absl::StatusOr<TrainTest> tt = LoadDataset("cifar10", dir);
  ASSERT_TRUE(tt.ok()) << tt.status();
  EXPECT_EQ(tt->train.size(), 10);
  EXPECT_EQ(tt->test.size(), 2);
  EXPECT_FALSE(LoadDataset("imagenet", dir).ok());
  absl::StatusOr<TrainTest> missing = LoadDataset("fashion-mnist", TempDir() + "/none");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("train-images-idx3-ubyte"), std::string::npos);
}

TEST(DatasetTest, RealFashionMnistFromDebianPackage) {
  absl::StatusOr<TrainTest> tt = LoadDataset("fashion-mnist", kDebianFashionMnistDir);
  ASSERT_TRUE(tt.ok()) << tt.status() << " (tools/install_deps installs dataset-fashion-mnist)";
  EXPECT_EQ(tt->train.size(), 60000);
  EXPECT_EQ(tt->test.size(), 10000);
  EXPECT_EQ(tt->train.shape, (Shape{1, 28, 28}));
  std::vector<int> per_class(10, 0);
  for (int32_t l : tt->test.labels) ++per_class[l];
  for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[c], 1000);
}

Dataset Tiny(int n) {
  Dataset d;
  d.shape = {1, 2, 2};
  for (int i = 0; i < n; ++i) {
    d.labels.push_back(i % 10);
    for (int k = 0; k < 4; ++k) d.pixels.push_back(static_cast<uint8_t>(i));
  }
  d.mean = {0.5f};
  d.stddev = {0.25f};
  return d;
}

TEST(BatcherTest, ShardsAreDisjointCoverAndReshuffle) {
  const Dataset d = Tiny(103);
  std::set<int> seen;
  for (int rank = 0; rank < 3; ++rank) {
    Batcher b(&d, {rank, 3, 9, true, false});
    std::vector<float> images(16 * 4);
    std::vector<int32_t> labels(16);
    std::vector<int> epoch0, epoch1;
    int n;
    while ((n = b.Next(16, images.data(), labels.data())) > 0) {
      for (int i = 0; i < n; ++i) {
        const int index = static_cast<int>(std::lround((images[i * 4] * 0.25f + 0.5f) * 255));
        EXPECT_EQ(index % 3, rank);
        EXPECT_EQ(labels[i], index % 10);
        EXPECT_TRUE(seen.insert(index).second) << "sample " << index << " twice";
        epoch0.push_back(index);
      }
    }
    b.StartEpoch(1);
    while ((n = b.Next(16, images.data(), labels.data())) > 0) {
      for (int i = 0; i < n; ++i) {
        epoch1.push_back(static_cast<int>(std::lround((images[i * 4] * 0.25f + 0.5f) * 255)));
      }
    }
    EXPECT_EQ(epoch0.size(), epoch1.size());
    EXPECT_NE(epoch0, epoch1);  // reshuffled
    EXPECT_EQ(std::set<int>(epoch0.begin(), epoch0.end()), std::set<int>(epoch1.begin(), epoch1.end()));
  }
  EXPECT_EQ(seen.size(), 103u);
}

// A resumed job skips what the steps before the checkpoint took: the rest is what an
// uninterrupted batcher would have given, across an internal reshuffle when wrapping.
TEST(BatcherTest, SkipLandsWhereTakingThoseSamplesWould) {
  const Dataset d = Tiny(50);
  auto first_label_after = [&d](int64_t taken, bool wrapping, bool skip) {
    Batcher b(&d, {0, 1, 9, true, false});
    std::vector<float> images(50 * 4);
    std::vector<int32_t> labels(50);
    if (skip) {
      b.Skip(taken, wrapping);
    } else {
      for (int64_t left = taken; left > 0; left -= 7) {
        const int n = static_cast<int>(std::min<int64_t>(7, left));
        wrapping ? b.NextWrapping(n, images.data(), labels.data())
                 : b.Next(n, images.data(), labels.data());
      }
    }
    const int n = wrapping ? b.NextWrapping(3, images.data(), labels.data())
                           : b.Next(3, images.data(), labels.data());
    return n == 0 ? -1 : static_cast<int>(std::lround((images[0] * 0.25f + 0.5f) * 255));
  };
  for (int64_t taken : {0, 21, 49}) {
    EXPECT_EQ(first_label_after(taken, false, true), first_label_after(taken, false, false));
  }
  EXPECT_EQ(first_label_after(50, false, true), -1);  // the epoch is over
  for (int64_t taken : {14, 56, 120}) {
    EXPECT_EQ(first_label_after(taken, true, true), first_label_after(taken, true, false));
  }
}

TEST(BatcherTest, AugmentationIsACropOrFlipOfTheImage) {
  Dataset d;
  d.shape = {1, 6, 6};
  d.labels = {0};
  for (int i = 0; i < 36; ++i) d.pixels.push_back(static_cast<uint8_t>(i + 1));
  std::mt19937_64 rng(4);
  std::vector<float> out(36);
  for (int trial = 0; trial < 50; ++trial) {
    Batcher::Normalise(d, 0, &rng, out.data());
    bool matched = false;
    for (int dy = -4; dy <= 4 && !matched; ++dy) {
      for (int dx = -4; dx <= 4 && !matched; ++dx) {
        for (bool flip : {false, true}) {
          bool all = true;
          for (int y = 0; y < 6 && all; ++y) {
            for (int x = 0; x < 6 && all; ++x) {
              const int sy = y + dy, sx = (flip ? 5 - x : x) + dx;
              const float want =
                  (sy >= 0 && sy < 6 && sx >= 0 && sx < 6) ? (sy * 6 + sx + 1) / 255.0f : 0.0f;
              all = std::abs(out[y * 6 + x] - want) < 1e-6f;
            }
          }
          matched |= all;
        }
      }
    }
    EXPECT_TRUE(matched) << "trial " << trial;
  }
}

}  // namespace
}  // namespace r2sp::models
