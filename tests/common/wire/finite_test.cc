// AllFinite (common/wire/finite.h): NaN and ±Inf are found at any position, including the
// vectorised loop's edges; zeros, denormals and the largest finite values pass.
#include "common/wire/finite.h"

#include <cstddef>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace r2sp::wire {
namespace {

TEST(AllFiniteTest, FindsNaNAndInfAnywhere) {
  std::vector<float> v(1001, 1.0f);
  v[500] = -0.0f;
  v[17] = std::numeric_limits<float>::denorm_min();
  v[18] = std::numeric_limits<float>::max();
  EXPECT_TRUE(AllFinite(v.data(), v.size()));
  EXPECT_TRUE(AllFinite(v.data(), 0));
  for (size_t at : {size_t{0}, size_t{15}, size_t{16}, size_t{1000}}) {
    for (float bad :
         {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
          std::numeric_limits<float>::quiet_NaN()}) {
      std::vector<float> w = v;
      w[at] = bad;
      EXPECT_FALSE(AllFinite(w.data(), w.size())) << at << " " << bad;
    }
  }
}

}  // namespace
}  // namespace r2sp::wire
