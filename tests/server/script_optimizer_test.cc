// The training script's optimizers on the server (server/script_optimizer.h) against torch's
// formulas, two updates each: SGD plain, with momentum and dampening, and nesterov (values chosen
// so every result is exact in fp32), Adam's L2 and AdamW's decoupled weight decay (against a
// double-precision reference); the gradient scale, updates in place, and Adam's fractional step.
#include "server/script_optimizer.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace r2sp {
namespace {

proto::OptimizerSettings Sgd(double lr, double momentum, double dampening, double weight_decay,
                             bool nesterov = false) {
  proto::OptimizerSettings s;
  s.set_kind(proto::OPTIMIZER_SGD);
  s.set_lr(lr);
  s.set_momentum(momentum);
  s.set_dampening(dampening);
  s.set_weight_decay(weight_decay);
  s.set_nesterov(nesterov);
  return s;
}

proto::OptimizerSettings Adam(proto::OptimizerKind kind, double lr, double weight_decay) {
  proto::OptimizerSettings s;
  s.set_kind(kind);
  s.set_lr(lr);
  s.set_weight_decay(weight_decay);
  s.set_beta1(0.9);
  s.set_beta2(0.999);
  s.set_eps(1e-8);
  return s;
}

// One partition's weights and optimizer state, updated by ApplyScriptOptimizer.
struct State {
  explicit State(std::vector<float> w)
      : weights(std::move(w)), first(weights.size(), 0.0f), second(weights.size(), 0.0f) {}
  // Update `number` (from 1) with gradient `g`, into weights (out of place unless `in_place`).
  void Apply(const proto::OptimizerSettings& s, int64_t number, const std::vector<float>& g,
             float scale = 1.0f, float fraction = 1.0f, bool in_place = false) {
    std::vector<float> out(weights.size(), -99.0f);
    float* target = in_place ? weights.data() : out.data();
    // Updates of one fraction each: `number` of them make number * fraction steps.
    const ScriptUpdate update{scale, fraction, number, static_cast<double>(number) * fraction};
    ApplyScriptOptimizer(s, update, g.data(), weights.data(), target, first.data(),
                         second.data(), weights.size());
    if (!in_place) weights = out;
  }
  std::vector<float> weights, first, second;
};

bool BitIdentical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(ScriptOptimizerTest, SgdPlainWithWeightDecay) {
  // d = g + 0.25 w;  w -= 0.5 d.
  const proto::OptimizerSettings s = Sgd(0.5, 0, 0, 0.25);
  State st({1, -2});
  st.Apply(s, 1, {0.5f, 1});  // d = {0.75, 0.5}
  EXPECT_EQ(st.weights, (std::vector<float>{0.625f, -2.25f}));
  st.Apply(s, 2, {-1, 0.25f});  // d = {-0.84375, -0.3125}
  EXPECT_EQ(st.weights, (std::vector<float>{1.046875f, -2.09375f}));
  EXPECT_EQ(st.first, (std::vector<float>{0, 0}));  // no momentum: no buffer
}

TEST(ScriptOptimizerTest, AverageSetsTheWeightsToTheScaledGradientAndKeepsNoState) {
  proto::OptimizerSettings s;
  s.set_kind(proto::OPTIMIZER_AVERAGE);
  State st({1, -2, 7});
  st.Apply(s, 1, {3, 0.5f, -6}, /*scale=*/0.25f);
  EXPECT_EQ(st.weights, (std::vector<float>{0.75f, 0.125f, -1.5f}));
  st.Apply(s, 2, {1, 1, 1}, 0.5f, 1.0f, /*in_place=*/true);
  EXPECT_EQ(st.weights, (std::vector<float>{0.5f, 0.5f, 0.5f}));
  EXPECT_EQ(st.first, (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(st.second, (std::vector<float>{0, 0, 0}));
  std::vector<float> predicted(3, -1.0f);
  PredictScriptRun(s, 2.0, 0.5f, 3, st.weights.data(), st.first.data(), st.second.data(),
                   predicted.data(), 3);
  EXPECT_EQ(predicted, st.weights);  // nothing to predict: the value is an average
}

TEST(ScriptOptimizerTest, SgdMomentumWithDampeningTakesTheFirstGradientWhole) {
  // torch: buf = d on the first step, then buf = 0.5 buf + (1 - 0.5) d;  w -= 0.5 buf.
  const proto::OptimizerSettings s = Sgd(0.5, 0.5, 0.5, 0);
  State st({1, -2});
  st.Apply(s, 1, {1, -0.5f});  // buf = {1, -0.5}, not dampened
  EXPECT_EQ(st.first, (std::vector<float>{1, -0.5f}));
  EXPECT_EQ(st.weights, (std::vector<float>{0.5f, -1.75f}));
  st.Apply(s, 2, {0.5f, 0.5f});  // buf = {0.5 + 0.25, -0.25 + 0.25}
  EXPECT_EQ(st.first, (std::vector<float>{0.75f, 0}));
  EXPECT_EQ(st.weights, (std::vector<float>{0.125f, -1.75f}));
}

TEST(ScriptOptimizerTest, SgdNesterov) {
  // d = g + 0.25 w;  buf = d (first), then 0.5 buf + d;  w -= 0.5 (d + 0.5 buf).
  const proto::OptimizerSettings s = Sgd(0.5, 0.5, 0, 0.25, /*nesterov=*/true);
  State st({1, -2});
  st.Apply(s, 1, {0.5f, 1});  // d = buf = {0.75, 0.5}; d + 0.5 buf = {1.125, 0.75}
  EXPECT_EQ(st.first, (std::vector<float>{0.75f, 0.5f}));
  EXPECT_EQ(st.weights, (std::vector<float>{0.4375f, -2.375f}));
  // d = {-0.890625, -0.34375}; buf = {-0.515625, -0.09375}; d + 0.5 buf = {-1.1484375, -0.390625}
  st.Apply(s, 2, {-1, 0.25f});
  EXPECT_EQ(st.first, (std::vector<float>{-0.515625f, -0.09375f}));
  EXPECT_EQ(st.weights, (std::vector<float>{1.01171875f, -2.1796875f}));
}

// torch.optim.Adam / AdamW's update `t` of the weights in double (as Python computes the
// constants): AdamW first decays w *= 1 - lr f wd, Adam adds wd w to the gradient; then
//   m = c1 m + (1 - c1) d;  v = c2 v + (1 - c2) (f d^2 + (1 - f) (m / (1 - b1^s))^2);
//   w -= (lr f / (1 - b1^s)) m / (sqrt(v) / sqrt(1 - b2^s) + eps)
// with f the update's fraction of a step (1 in torch: v takes d^2), c = b^f and s = t f the
// steps so far.
struct AdamReference {
  explicit AdamReference(const std::vector<float>& w0)
      : w(w0.begin(), w0.end()), m(w0.size(), 0.0), v(w0.size(), 0.0) {}
  void Step(const proto::OptimizerSettings& s, int t, const std::vector<float>& g,
            double scale = 1, double fraction = 1) {
    const bool decoupled = s.kind() == proto::OPTIMIZER_ADAMW;
    const double c1 = std::pow(s.beta1(), fraction), c2 = std::pow(s.beta2(), fraction);
    const double steps = t * fraction;
    for (size_t i = 0; i < w.size(); ++i) {
      if (decoupled) w[i] *= 1 - s.lr() * fraction * s.weight_decay();
      const double d = scale * g[i] + (decoupled ? 0 : s.weight_decay() * w[i]);
      m[i] = c1 * m[i] + (1 - c1) * d;
      const double mean = m[i] / (1 - std::pow(s.beta1(), steps));
      v[i] = c2 * v[i] + (1 - c2) * (fraction * d * d + (1 - fraction) * mean * mean);
      const double denom =
          std::sqrt(v[i]) / std::sqrt(1 - std::pow(s.beta2(), steps)) + s.eps();
      w[i] -= s.lr() * fraction / (1 - std::pow(s.beta1(), steps)) * m[i] / denom;
    }
  }
  std::vector<double> w, m, v;
};

void ExpectMatches(const State& st, const AdamReference& ref) {
  for (size_t i = 0; i < st.weights.size(); ++i) {
    EXPECT_FLOAT_EQ(st.weights[i], static_cast<float>(ref.w[i])) << i;
    EXPECT_FLOAT_EQ(st.first[i], static_cast<float>(ref.m[i])) << i;
    EXPECT_FLOAT_EQ(st.second[i], static_cast<float>(ref.v[i])) << i;
  }
}

const std::vector<float> kAdamStart = {1, -2, 0.5f};
const std::vector<float> kAdamGrad1 = {0.5f, 1, -0.25f};
const std::vector<float> kAdamGrad2 = {-1, 0.5f, 0.75f};

TEST(ScriptOptimizerTest, AdamAddsL2WeightDecayToTheGradient) {
  const proto::OptimizerSettings s = Adam(proto::OPTIMIZER_ADAM, 0.1, 0.01);
  State st(kAdamStart);
  AdamReference ref(kAdamStart);
  st.Apply(s, 1, kAdamGrad1);
  ref.Step(s, 1, kAdamGrad1);
  // The first update moves each weight by lr against its gradient's sign: d / (|d| + eps).
  EXPECT_FLOAT_EQ(st.weights[0], 0.9f);
  EXPECT_FLOAT_EQ(st.weights[1], -2.1f);
  EXPECT_FLOAT_EQ(st.weights[2], 0.6f);
  // d = g + 0.01 w: exp_avg = 0.1 d, exp_avg_sq = 0.001 d^2.
  EXPECT_FLOAT_EQ(st.first[0], 0.1f * 0.51f);
  EXPECT_FLOAT_EQ(st.second[1], 0.001f * 0.98f * 0.98f);
  ExpectMatches(st, ref);
  st.Apply(s, 2, kAdamGrad2);
  ref.Step(s, 2, kAdamGrad2);
  ExpectMatches(st, ref);
}

TEST(ScriptOptimizerTest, AdamWDecaysTheWeightsApartFromTheGradient) {
  const proto::OptimizerSettings s = Adam(proto::OPTIMIZER_ADAMW, 0.1, 0.1);
  State st(kAdamStart);
  AdamReference ref(kAdamStart);
  st.Apply(s, 1, kAdamGrad1);
  ref.Step(s, 1, kAdamGrad1);
  // w (1 - 0.01) - 0.1 sign(g); the moments see the gradient alone.
  EXPECT_FLOAT_EQ(st.weights[0], 0.89f);
  EXPECT_FLOAT_EQ(st.weights[1], -2.08f);
  EXPECT_FLOAT_EQ(st.weights[2], 0.595f);
  EXPECT_FLOAT_EQ(st.first[0], 0.05f);
  EXPECT_FLOAT_EQ(st.second[2], 0.001f * 0.0625f);
  ExpectMatches(st, ref);
  st.Apply(s, 2, kAdamGrad2);
  ref.Step(s, 2, kAdamGrad2);
  ExpectMatches(st, ref);
}

// scale * g is the gradient (before weight decay is added): scale 0.5 of 2g updates bit for bit
// as g does.
TEST(ScriptOptimizerTest, ScaleMultipliesTheGradient) {
  const std::vector<proto::OptimizerSettings> all = {
      Sgd(0.5, 0.5, 0.5, 0.25), Sgd(0.5, 0.5, 0, 0.25, true),
      Adam(proto::OPTIMIZER_ADAM, 0.1, 0.01), Adam(proto::OPTIMIZER_ADAMW, 0.1, 0.1)};
  for (const proto::OptimizerSettings& s : all) {
    State plain(kAdamStart), halved(kAdamStart);
    for (int t = 1; t <= 2; ++t) {
      const std::vector<float>& g = t == 1 ? kAdamGrad1 : kAdamGrad2;
      std::vector<float> doubled(g.size());
      for (size_t i = 0; i < g.size(); ++i) doubled[i] = 2 * g[i];
      plain.Apply(s, t, g);
      halved.Apply(s, t, doubled, /*scale=*/0.5f);
    }
    EXPECT_TRUE(BitIdentical(plain.weights, halved.weights)) << s.ShortDebugString();
    EXPECT_TRUE(BitIdentical(plain.first, halved.first)) << s.ShortDebugString();
    EXPECT_TRUE(BitIdentical(plain.second, halved.second)) << s.ShortDebugString();
  }
  // Against torch given the scaled gradient: Adam's L2 term is added after scaling.
  const proto::OptimizerSettings adam = Adam(proto::OPTIMIZER_ADAM, 0.1, 0.01);
  State st(kAdamStart);
  AdamReference ref(kAdamStart);
  st.Apply(adam, 1, kAdamGrad1, /*scale=*/0.25f);
  ref.Step(adam, 1, kAdamGrad1, /*scale=*/0.25);
  ExpectMatches(st, ref);
  // SGD: d = 0.25 * 2 + 0.25 * 1 = 0.75 (not 0.25 * (2 + 0.25));  w = 1 - 0.5 * 0.75.
  State sgd({1});
  sgd.Apply(Sgd(0.5, 0, 0, 0.25), 1, {2}, /*scale=*/0.25f);
  EXPECT_EQ(sgd.weights, (std::vector<float>{0.625f}));
}

TEST(ScriptOptimizerTest, UpdatesInPlaceAsOutOfPlace) {
  const std::vector<proto::OptimizerSettings> all = {
      Sgd(0.5, 0, 0, 0.25), Sgd(0.5, 0.5, 0.5, 0.25), Sgd(0.5, 0.5, 0, 0.25, true),
      Adam(proto::OPTIMIZER_ADAM, 0.1, 0.01), Adam(proto::OPTIMIZER_ADAMW, 0.1, 0.1)};
  for (const proto::OptimizerSettings& s : all) {
    State out_of_place(kAdamStart), in_place(kAdamStart);
    for (int t = 1; t <= 2; ++t) {
      const std::vector<float>& g = t == 1 ? kAdamGrad1 : kAdamGrad2;
      out_of_place.Apply(s, t, g);
      in_place.Apply(s, t, g, 1.0f, 1.0f, /*in_place=*/true);
    }
    EXPECT_TRUE(BitIdentical(out_of_place.weights, in_place.weights)) << s.ShortDebugString();
    EXPECT_TRUE(BitIdentical(out_of_place.first, in_place.first)) << s.ShortDebugString();
    EXPECT_TRUE(BitIdentical(out_of_place.second, in_place.second)) << s.ShortDebugString();
  }
  // A known value in place: plain SGD as in SgdPlainWithWeightDecay.
  State st({1, -2});
  st.Apply(Sgd(0.5, 0, 0, 0.25), 1, {0.5f, 1}, 1.0f, 1.0f, /*in_place=*/true);
  EXPECT_EQ(st.weights, (std::vector<float>{0.625f, -2.25f}));
}

// An asynchronous push of a fraction f of a step: Adam's step size is lr f / (1 - b1^t); its
// moments decay per sample, and the second moment takes f d^2 + (1 - f) m^2 (m bias-corrected),
// what the global batch's gradient squares to in expectation.
TEST(ScriptOptimizerTest, AdamFractionScalesTheStep) {
  const proto::OptimizerSettings s = Adam(proto::OPTIMIZER_ADAM, 0.1, 0.01);
  State part(kAdamStart);
  AdamReference ref(kAdamStart);
  part.Apply(s, 1, kAdamGrad1, 1.0f, /*fraction=*/0.25f);
  ref.Step(s, 1, kAdamGrad1, 1, /*fraction=*/0.25);
  // The first update moves by lr f = 0.025 against the gradient's sign.
  EXPECT_FLOAT_EQ(part.weights[0], 0.975f);
  EXPECT_FLOAT_EQ(part.weights[1], -2.025f);
  EXPECT_FLOAT_EQ(part.weights[2], 0.525f);
  ExpectMatches(part, ref);
  part.Apply(s, 2, kAdamGrad2, 1.0f, /*fraction=*/0.25f);
  ref.Step(s, 2, kAdamGrad2, 1, /*fraction=*/0.25);
  ExpectMatches(part, ref);

  // Without weight decay, two half steps of one gradient move the weights as one whole step
  // does: the moments decay per sample and are corrected by the steps made.
  const proto::OptimizerSettings plain = Adam(proto::OPTIMIZER_ADAM, 0.1, 0);
  State halves(kAdamStart), whole(kAdamStart);
  halves.Apply(plain, 1, kAdamGrad1, 1.0f, /*fraction=*/0.5f);
  halves.Apply(plain, 2, kAdamGrad1, 1.0f, /*fraction=*/0.5f);
  whole.Apply(plain, 1, kAdamGrad1);
  for (size_t i = 0; i < kAdamStart.size(); ++i) {
    EXPECT_FLOAT_EQ(halves.weights[i], whole.weights[i]) << i;
    EXPECT_FLOAT_EQ(halves.first[i], whole.first[i]) << i;
    EXPECT_FLOAT_EQ(halves.second[i], whole.second[i]) << i;
  }
}

// A push of a quarter of a step decays AdamW's weights by a quarter of a whole step's
// decoupled decay (lr f wd), not a whole one: 4 such pushes decay as one step does.
TEST(ScriptOptimizerTest, AdamWFractionScalesTheDecoupledDecay) {
  const proto::OptimizerSettings s = Adam(proto::OPTIMIZER_ADAMW, 0.1, 0.5);
  const std::vector<float> zero_grad = {0, 0, 0};
  State part(kAdamStart);
  part.Apply(s, 1, zero_grad, 1.0f, /*fraction=*/0.25f);
  // No gradient: the update is the decay alone, w (1 - 0.1 * 0.25 * 0.5).
  EXPECT_EQ(part.weights[0], static_cast<float>(1 - 0.1 * 0.25 * 0.5));
  EXPECT_EQ(part.weights[1], -2 * static_cast<float>(1 - 0.1 * 0.25 * 0.5));
  AdamReference ref(kAdamStart);
  part.Apply(s, 2, kAdamGrad1, 1.0f, /*fraction=*/0.25f);
  ref.Step(s, 1, zero_grad, 1, 0.25);
  ref.Step(s, 2, kAdamGrad1, 1, 0.25);
  ExpectMatches(part, ref);
}

}  // namespace
}  // namespace r2sp
