// The optimizer's arithmetic against a double-precision reference.
#include "server/sgd.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace r2sp {
namespace {

struct Case {
  float lr, momentum, wd, scale;
};

class SgdTest : public ::testing::TestWithParam<Case> {};

TEST_P(SgdTest, MatchesDoubleReferenceOverSteps) {
  const Case c = GetParam();
  const SgdOptions options{c.lr, c.momentum, c.wd};
  const size_t n = 1037;  // not a multiple of any vector width
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> w(n), m(n, 0.0f), w2(n), m2(n, 0.0f), w_out(n);
  std::vector<double> rw(n), rm(n, 0.0);
  for (size_t i = 0; i < n; ++i) rw[i] = w[i] = w2[i] = dist(rng);
  for (int step = 0; step < 5; ++step) {
    std::vector<float> g(n);
    for (float& x : g) x = dist(rng);
    SgdApply(options, c.scale, g.data(), w.data(), w.data(), m.data(), n);            // in place
    SgdApply(options, c.scale, g.data(), w2.data(), w_out.data(), m2.data(), n);      // out of place
    w2 = w_out;
    for (size_t i = 0; i < n; ++i) {
      const double d = double{c.scale} * g[i] + double{c.wd} * rw[i];
      rm[i] = double{c.momentum} * rm[i] + d;
      rw[i] -= double{c.lr} * (c.momentum != 0 ? rm[i] : d);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    ASSERT_NEAR(w[i], rw[i], 1e-5) << "element " << i;
    ASSERT_EQ(w[i], w2[i]) << "in-place and out-of-place differ at " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Options, SgdTest,
                         ::testing::Values(Case{0.1f, 0.9f, 0.0f, 1.0f},
                                           Case{0.05f, 0.9f, 5e-4f, 1.0f},
                                           Case{0.1f, 0.0f, 0.0f, 1.0f},
                                           Case{0.1f, 0.0f, 1e-3f, 0.25f},
                                           Case{0.2f, 0.5f, 1e-4f, 1.0f / 3}));

TEST(SgdTest, KnownValues) {
  // w=1, g=2, wd=0.5, mu=0.9, lr=0.1, scale 0.5: d = 1 + 0.5 = 1.5; m = 1.5; w = 0.85.
  float w = 1, m = 0, g = 2;
  SgdApply({0.1f, 0.9f, 0.5f}, 0.5f, &g, &w, &w, &m, 1);
  EXPECT_FLOAT_EQ(m, 1.5f);
  EXPECT_FLOAT_EQ(w, 0.85f);
  // Second step: d = 1 + 0.425 = 1.425; m = 1.35 + 1.425 = 2.775; w = 0.85 - 0.2775.
  SgdApply({0.1f, 0.9f, 0.5f}, 0.5f, &g, &w, &w, &m, 1);
  EXPECT_FLOAT_EQ(m, 2.775f);
  EXPECT_FLOAT_EQ(w, 0.5725f);
}

}  // namespace
}  // namespace r2sp
