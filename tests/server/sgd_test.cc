// The optimizer's arithmetic against a double-precision reference.
#include "server/sgd.h"

#include <cmath>
#include <cstring>
#include <random>
#include <limits>
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

TEST(StepForFractionTest, WholeStepIsUnchanged) {
  const SgdOptions options{0.1f, 0.9f, 5e-4f};
  const FractionalStep step = StepForFraction(options, 1.0f);
  EXPECT_EQ(step.options.learning_rate, 0.1f);
  EXPECT_EQ(step.options.momentum, 0.9f);
  EXPECT_EQ(step.options.weight_decay, 5e-4f);
  EXPECT_EQ(step.grad_scale, 1.0f);
}

TEST(StepForFractionTest, KnownValues) {
  // f = 1/4, mu = 0.9: mu^f = 0.974004, (1 - mu^f) / (1 - mu) = 0.259963, rate * 1/4.
  const FractionalStep step = StepForFraction({0.1f, 0.9f, 1e-3f}, 0.25f);
  EXPECT_NEAR(step.options.momentum, 0.974004, 1e-6);
  EXPECT_NEAR(step.grad_scale, 0.259963, 1e-6);
  EXPECT_NEAR(step.options.weight_decay, 1e-3 * 0.259963, 1e-9);
  EXPECT_FLOAT_EQ(step.options.learning_rate, 0.025f);
  // Without momentum a fraction is plain SGD at f times the rate.
  const FractionalStep plain = StepForFraction({0.1f, 0.0f, 0.0f}, 0.25f);
  EXPECT_EQ(plain.options.momentum, 0.0f);
  EXPECT_EQ(plain.grad_scale, 1.0f);
  EXPECT_FLOAT_EQ(plain.options.learning_rate, 0.025f);
}

// With a constant gradient, 1/f fractional updates move the weights as one whole step does
// once the buffer is in its steady state, and leave the buffer where whole steps keep it.
TEST(StepForFractionTest, FractionsOfAStepAddUpToAWholeStep) {
  const SgdOptions options{0.1f, 0.9f, 0.0f};
  const float g = 2.0f;
  const float steady = g / (1.0f - 0.9f);
  float w_whole = 1.0f, m_whole = steady;
  SgdApply(options, 1.0f, &g, &w_whole, &w_whole, &m_whole, 1);
  for (float f : {0.5f, 0.25f, 0.125f}) {
    float w = 1.0f, m = steady;
    const FractionalStep step = StepForFraction(options, f);
    for (int i = 0; i < static_cast<int>(1 / f); ++i) {
      SgdApply(step.options, step.grad_scale, &g, &w, &w, &m, 1);
    }
    EXPECT_NEAR(w, w_whole, 1e-5) << "f=" << f;
    EXPECT_NEAR(m, steady, 1e-4) << "f=" << f;
  }
}

// From a cold buffer, per-sample momentum makes many small pushes track whole steps closely
// (per-update momentum with the rate scaled by f would lag far behind).
TEST(StepForFractionTest, ColdStartTracksWholeSteps) {
  const SgdOptions options{0.01f, 0.9f, 0.0f};
  const float g = 1.0f;
  float w_whole = 0.0f, m_whole = 0.0f;
  for (int i = 0; i < 20; ++i) SgdApply(options, 1.0f, &g, &w_whole, &w_whole, &m_whole, 1);
  float w = 0.0f, m = 0.0f;
  const FractionalStep step = StepForFraction(options, 0.25f);
  for (int i = 0; i < 80; ++i) SgdApply(step.options, step.grad_scale, &g, &w, &w, &m, 1);
  EXPECT_NEAR(w, w_whole, 0.05 * std::abs(w_whole));
  float w_naive = 0.0f, m_naive = 0.0f;
  for (int i = 0; i < 80; ++i) SgdApply(options, 0.25f, &g, &w_naive, &w_naive, &m_naive, 1);
  EXPECT_GT(std::abs(w_naive - w_whole), 0.2 * std::abs(w_whole));
}

// SgdApplyKeepingStep updates exactly as SgdApply does and keeps the gradient term per unit of
// scale: g + weight_decay / scale * w, with the weights before the update.
TEST(SgdApplyKeepingStepTest, SameUpdateAndKeepsTheUnitStep) {
  const FractionalStep step = StepForFraction({0.1f, 0.9f, 0.01f}, 0.25f);
  const std::vector<float> g = {1.0f, -2.0f, 0.5f};
  std::vector<float> w = {0.3f, -0.7f, 2.0f}, m = {0.2f, 0.1f, -0.4f};
  std::vector<float> w2 = w, m2 = m, u(3);
  SgdApply(step.options, step.grad_scale, g.data(), w.data(), w.data(), m.data(), 3);
  const std::vector<float> before = w2;
  SgdApplyKeepingStep(step.options, step.grad_scale, g.data(), w2.data(), w2.data(), m2.data(),
                      u.data(), 3);
  EXPECT_EQ(w, w2);
  EXPECT_EQ(m, m2);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(u[i], g[i] + 0.01f * before[i], 1e-6) << i;
}

// SgdApplyPredicting is SgdApplyKeepingStep followed by PredictWeights over what it left, bit
// for bit, in place and out of place, at lengths that end inside a vector and at every
// momentum (the kernels are separate loops the compiler vectorises on its own).
TEST(SgdApplyPredictingTest, SameBitsAsTheUpdateThenThePrediction) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (size_t n : {size_t{1}, size_t{7}, size_t{33}, size_t{1000}}) {
    for (float mu : {0.0f, 0.9f}) {
      const SgdOptions options{0.05f, mu, 1e-4f};
      const FractionalStep step = StepForFraction(options, 0.25f);
      const Prediction p = PredictionFor(options, 0.25f, 3);
      std::vector<float> g(n), w(n), m(n), u(n);
      for (size_t i = 0; i < n; ++i) {
        g[i] = normal(rng);
        w[i] = normal(rng);
        m[i] = normal(rng);
      }
      std::vector<float> w_ref = w, m_ref = m, u_ref(n), predicted_ref(n);
      SgdApplyKeepingStep(step.options, step.grad_scale, g.data(), w_ref.data(), w_ref.data(),
                          m_ref.data(), u_ref.data(), n);
      PredictWeights(p, w_ref.data(), m_ref.data(), u_ref.data(), predicted_ref.data(), n);
      for (bool in_place : {true, false}) {
        std::vector<float> w_in = w, w_out(n), m2 = m, predicted(n);
        float* out = in_place ? w_in.data() : w_out.data();
        SgdApplyPredicting(step.options, step.grad_scale, p, g.data(), w_in.data(), out,
                           m2.data(), u.data(), predicted.data(), n);
        const auto same = [n](const std::vector<float>& a, const float* b) {
          return std::memcmp(a.data(), b, n * sizeof(float)) == 0;
        };
        EXPECT_TRUE(same(w_ref, out)) << n << " mu " << mu << " in place " << in_place;
        EXPECT_TRUE(same(m_ref, m2.data())) << n << " mu " << mu;
        EXPECT_TRUE(same(u_ref, u.data())) << n << " mu " << mu;
        EXPECT_TRUE(same(predicted_ref, predicted.data())) << n << " mu " << mu;
      }
    }
  }
}

// The prediction is exactly where `updates` fractional updates with the same gradient take the
// weights, from any momentum buffer (no weight decay, so the gradient term stays constant).
TEST(PredictionForTest, MatchesTheUpdatesItPredicts) {
  for (float mu : {0.0f, 0.5f, 0.9f}) {
    for (int updates : {1, 3, 7}) {
      const SgdOptions options{0.05f, mu, 0.0f};
      const float each = 0.75f / updates;
      const std::vector<float> g = {1.0f, -3.0f};
      std::vector<float> w = {0.5f, 1.5f}, m = {mu > 0 ? 2.0f : 0.0f, -1.0f};
      std::vector<float> predicted(2);
      PredictWeights(PredictionFor(options, each, updates), w.data(), m.data(), g.data(),
                     predicted.data(), 2);
      const FractionalStep step = StepForFraction(options, each);
      for (int j = 0; j < updates; ++j) {
        SgdApply(step.options, step.grad_scale, g.data(), w.data(), w.data(), m.data(), 2);
      }
      for (int i = 0; i < 2; ++i) {
        EXPECT_NEAR(predicted[i], w[i], 1e-5) << "mu=" << mu << " updates=" << updates;
      }
    }
  }
}

TEST(PredictionForTest, KnownValues) {
  // Whole steps, mu 0.5, lr 0.1, 2 updates: momentum 0.1 * (0.5 + 0.25), step 0.1 * (1 + 1.5).
  const Prediction p = PredictionFor({0.1f, 0.5f, 0.0f}, 1.0f, 2);
  EXPECT_NEAR(p.momentum_coeff, 0.075f, 1e-7);
  EXPECT_NEAR(p.step_coeff, 0.25f, 1e-7);
  float w = 1.0f, m = 2.0f, u = 4.0f, x = 0.0f;
  PredictWeights(p, &w, &m, &u, &x, 1);
  EXPECT_NEAR(x, 1.0f - 0.15f - 1.0f, 1e-6);
}

}  // namespace
}  // namespace r2sp
