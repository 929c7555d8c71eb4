// HostArray: page-aligned storage, a whole number of pages long, so pinning one array
// never shares a page with another (two pinned neighbours must not collide).
#include "common/host_array.h"

#include <unistd.h>

#include <cstdint>

#include "gtest/gtest.h"

namespace r2sp {
namespace {

TEST(HostArrayTest, ArraysStartOnTheirOwnPagesAndHoldTheirValues) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  // Sizes that end mid-page, so neighbours would share a page without the rounding.
  HostArray a(1000, 1.0f), b(3, 2.0f), c(page / sizeof(float) + 1, 3.0f);
  for (const HostArray* v : {&a, &b, &c}) {
    const uintptr_t start = reinterpret_cast<uintptr_t>(v->data());
    EXPECT_EQ(start % page, 0u);
  }
  // No two arrays' page ranges overlap.
  auto pages = [page](const HostArray& v) {
    const uintptr_t start = reinterpret_cast<uintptr_t>(v.data());
    const uintptr_t end = start + v.size() * sizeof(float);
    return std::make_pair(start / page, (end + page - 1) / page);
  };
  const auto pa = pages(a), pb = pages(b), pc = pages(c);
  for (const auto& [x, y] : {std::make_pair(pa, pb), std::make_pair(pa, pc),
                             std::make_pair(pb, pc)}) {
    EXPECT_TRUE(x.second <= y.first || y.second <= x.first);
  }
  EXPECT_EQ(a[999], 1.0f);
  EXPECT_EQ(b[2], 2.0f);
  c.assign(10, 4.0f);  // reallocation keeps the alignment
  EXPECT_EQ(reinterpret_cast<uintptr_t>(c.data()) % page, 0u);
  EXPECT_EQ(c[9], 4.0f);
}

}  // namespace
}  // namespace r2sp
