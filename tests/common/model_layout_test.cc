// Partitioning of the model and assignment of partitions to servers.
#include "common/model_layout.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace r2sp {
namespace {

std::vector<proto::TensorSpec> Model(const std::vector<size_t>& sizes) {
  std::vector<proto::TensorSpec> model;
  for (size_t i = 0; i < sizes.size(); ++i) {
    proto::TensorSpec t;
    t.set_name("t" + std::to_string(i));
    t.set_num_elements(sizes[i]);
    model.push_back(t);
  }
  return model;
}

// Partitions must tile the flat model exactly, in key order, within the size limit.
void ExpectTiles(const ModelLayout& layout, size_t max_elements) {
  size_t next = 0;
  for (size_t k = 0; k < layout.partitions().size(); ++k) {
    const Partition& p = layout.partitions()[k];
    EXPECT_EQ(p.key, k);
    EXPECT_EQ(p.offset, next);
    EXPECT_GT(p.num_elements, 0u);
    EXPECT_LE(p.num_elements, max_elements);
    EXPECT_GE(p.server, 0);
    EXPECT_LT(p.server, layout.num_servers());
    next += p.num_elements;
  }
  EXPECT_EQ(next, layout.total_elements());
}

TEST(ModelLayoutTest, PacksSmallTensorsAndSplitsLargeOnes) {
  // Limit 100 floats: [10, 20, 30] pack into one; 250 splits into 84+83+83; 60 and 50 apart.
  absl::StatusOr<ModelLayout> layout = ModelLayout::Create(Model({10, 20, 30, 250, 60, 50}), 400, 2);
  ASSERT_TRUE(layout.ok()) << layout.status();
  ExpectTiles(*layout, 100);
  std::vector<size_t> sizes;
  for (const Partition& p : layout->partitions()) sizes.push_back(p.num_elements);
  EXPECT_EQ(sizes, (std::vector<size_t>{60, 84, 83, 83, 60, 50}));
  EXPECT_EQ(layout->tensors()[3].offset, 60u);
  EXPECT_EQ(layout->total_bytes(), 420u * 4);
}

TEST(ModelLayoutTest, BalancesBytesAcrossServers) {
  std::vector<size_t> sizes;
  for (int i = 0; i < 37; ++i) sizes.push_back(1000 + 97 * i);
  absl::StatusOr<ModelLayout> layout = ModelLayout::Create(Model(sizes), 8000, 4);
  ASSERT_TRUE(layout.ok());
  ExpectTiles(*layout, 2000);
  size_t lo = SIZE_MAX, hi = 0, largest = 0;
  for (int s = 0; s < 4; ++s) {
    lo = std::min(lo, layout->BytesOf(s));
    hi = std::max(hi, layout->BytesOf(s));
  }
  for (const Partition& p : layout->partitions()) largest = std::max(largest, p.bytes());
  // LPT keeps the spread within one partition.
  EXPECT_LE(hi - lo, largest);
  size_t keys = 0;
  for (int s = 0; s < 4; ++s) keys += layout->KeysOf(s).size();
  EXPECT_EQ(keys, layout->partitions().size());
}

TEST(ModelLayoutTest, IsDeterministic) {
  auto a = ModelLayout::Create(Model({5000, 7, 9000, 3}), 4096, 3);
  auto b = ModelLayout::Create(Model({5000, 7, 9000, 3}), 4096, 3);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->partitions().size(), b->partitions().size());
  for (size_t i = 0; i < a->partitions().size(); ++i) {
    EXPECT_EQ(a->partitions()[i].server, b->partitions()[i].server);
    EXPECT_EQ(a->partitions()[i].offset, b->partitions()[i].offset);
  }
}

TEST(ModelLayoutTest, FindRejectsUnknownKeys) {
  auto layout = ModelLayout::Create(Model({10, 10}), 40, 1);
  ASSERT_TRUE(layout.ok());
  EXPECT_NE(layout->Find(1), nullptr);
  EXPECT_EQ(layout->Find(2), nullptr);
  EXPECT_EQ(layout->Find(UINT64_MAX), nullptr);
}

// Every range of a model cut into partitions of 10 floats (a 25-float tensor split, two small
// ones packed), against the partitions found one by one.
TEST(ModelLayoutTest, KeysCoveringARangeAreItsFirstAndLastPartitions) {
  auto layout = ModelLayout::Create(Model({10, 25, 3, 2}), 40, 2);
  ASSERT_TRUE(layout.ok());
  const size_t n = layout->total_elements();
  for (size_t offset = 0; offset < n; ++offset) {
    for (size_t count = 1; offset + count <= n; ++count) {
      uint64_t first = UINT64_MAX, last = 0;
      for (const Partition& p : layout->partitions()) {
        if (p.offset < offset + count && offset < p.offset + p.num_elements) {
          first = std::min(first, p.key);
          last = std::max(last, p.key);
        }
      }
      EXPECT_EQ(layout->KeysCovering(offset, count), std::make_pair(first, last))
          << offset << " + " << count;
    }
  }
}

TEST(ModelLayoutTest, RejectsBadInput) {
  EXPECT_FALSE(ModelLayout::Create({}, 4096, 1).ok());
  EXPECT_FALSE(ModelLayout::Create(Model({0}), 4096, 1).ok());
  EXPECT_FALSE(ModelLayout::Create(Model({4}), 6, 1).ok());
  EXPECT_FALSE(ModelLayout::Create(Model({4}), 0, 1).ok());
  EXPECT_FALSE(ModelLayout::Create(Model({4}), 4096, 0).ok());
  auto dup = Model({4, 4});
  dup[1].set_name("t0");
  EXPECT_FALSE(ModelLayout::Create(dup, 4096, 1).ok());
}

}  // namespace
}  // namespace r2sp
