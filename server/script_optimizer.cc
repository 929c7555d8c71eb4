// See script_optimizer.h. The loops are written so GCC vectorises them (-O3 in BUILD), and
// round where torch's vectorised CPU kernels round (-ffp-contract=off: no fusing but the
// std::fma torch has); the per-update constants are computed in double, as torch computes
// them in Python, then used as fp32 scalars.
#include "server/script_optimizer.h"

#include <algorithm>
#include <cmath>

#include "common/target_clones.h"
#include "server/sgd.h"

namespace r2sp {
namespace {

struct SgdConstants {
  float lr, mu, wd, scale, dampened;  // dampened = 1 - dampening
  bool first, nesterov;
};

// torch's SGD, op by op: d = g + wd * w (one rounding: torch's add with alpha is a fused
// multiply-add), m = fma(d, 1 - dampening, m * mu), d = fma(m, mu, d) with nesterov, then
// w = fma(d, -lr, w). Weights may be updated in place, so they are not __restrict.
R2SP_FMA_TARGET_CLONES
void SgdLoop(const SgdConstants c, const float* __restrict g, const float* weight_in,
             float* weight_out, float* __restrict m, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float w = weight_in[i];
    float d = std::fma(w, c.wd, c.scale * g[i]);
    if (c.mu != 0.0f) {
      const float v = c.first ? d : std::fma(d, c.dampened, m[i] * c.mu);
      m[i] = v;
      d = c.nesterov ? std::fma(v, c.mu, d) : v;
    }
    weight_out[i] = std::fma(d, -c.lr, w);
  }
}

struct AdamConstants {
  float scale, l2, decay;            // L2 weight decay (Adam), decoupled factor (AdamW)
  float beta1, keep1, beta2, keep2;  // keep = 1 - beta
  float step_size, root_correction2, eps;
  // A fraction f < 1 of a step: the push's squared gradient counts f, the bias-corrected
  // first moment's square 1 - f (second_moment_mix).
  float fraction, rest, inv_correction1;
};

// torch's Adam and AdamW, op by op: w *= 1 - lr * wd (AdamW); d = fma(w, wd, g) (Adam);
// m = fma(d, 1 - beta1, m * beta1); v = fma((1 - beta2) * d, d, v * beta2);
// denom = sqrt(v) / c2 + eps;
// w = w + (-step_size * m) / denom.
R2SP_FMA_TARGET_CLONES
void AdamLoop(const AdamConstants c, const float* __restrict g, const float* weight_in,
              float* weight_out, float* __restrict m, float* __restrict v, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float w = weight_in[i] * c.decay;
    const float d = std::fma(w, c.l2, c.scale * g[i]);
    const float m1 = std::fma(d, c.keep1, m[i] * c.beta1);
    const float v1 = std::fma(c.keep2 * d, d, v[i] * c.beta2);
    m[i] = m1;
    v[i] = v1;
    const float denom = std::sqrt(v1) / c.root_correction2 + c.eps;
    weight_out[i] = w + (-c.step_size * m1) / denom;
  }
}

// AdamLoop for a fraction f < 1 of a step, whose gradient d averages f B samples: its square
// overstates the global batch's by the noise it adds (E d^2 = mu^2 + s^2 / (f B), where a
// global-batch gradient has mu^2 + s^2 / B), so the second moment takes f d^2 + (1 - f) m^2,
// with the bias-corrected first moment m standing for mu (it averages many pushes): in
// expectation the global batch's square, whether noise or signal dominates.
R2SP_FMA_TARGET_CLONES
void AdamFractionLoop(const AdamConstants c, const float* __restrict g, const float* weight_in,
                      float* weight_out, float* __restrict m, float* __restrict v, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float w = weight_in[i] * c.decay;
    const float d = std::fma(w, c.l2, c.scale * g[i]);
    const float m1 = std::fma(d, c.keep1, m[i] * c.beta1);
    const float mean = m1 * c.inv_correction1;
    const float square = std::fma(c.fraction * d, d, c.rest * mean * mean);
    const float v1 = std::fma(c.keep2, square, v[i] * c.beta2);
    m[i] = m1;
    v[i] = v1;
    const float denom = std::sqrt(v1) / c.root_correction2 + c.eps;
    weight_out[i] = w + (-c.step_size * m1) / denom;
  }
}

void ApplySgd(const proto::OptimizerSettings& s, const ScriptUpdate& u, const float* grad,
              const float* weight_in, float* weight_out, float* first, size_t n) {
  SgdOptions base;
  base.learning_rate = static_cast<float>(s.lr());
  base.momentum = static_cast<float>(s.momentum());
  base.weight_decay = static_cast<float>(s.weight_decay());
  const FractionalStep step = StepForFraction(base, u.fraction);
  SgdConstants c;
  c.lr = step.options.learning_rate;
  c.mu = step.options.momentum;
  c.wd = step.options.weight_decay;
  c.scale = u.scale * step.grad_scale;
  c.dampened = static_cast<float>(1.0 - s.dampening());
  c.first = u.number <= 1;
  c.nesterov = s.nesterov();
  SgdLoop(c, grad, weight_in, weight_out, first, n);
}

void ApplyAdam(const proto::OptimizerSettings& s, const ScriptUpdate& u, const float* grad,
               const float* weight_in, float* weight_out, float* first, float* second,
               size_t n) {
  // A fraction f of a step: the moments decay per sample (beta^f), and the bias correction
  // counts global-batch steps, so 1/f such updates weigh their gradients as one step does.
  const bool whole = u.fraction >= 1.0f;
  const double t = whole ? static_cast<double>(u.number) : u.steps;
  const double beta1 = whole ? s.beta1() : std::pow(s.beta1(), u.fraction);
  const double beta2 = whole ? s.beta2() : std::pow(s.beta2(), u.fraction);
  const bool decoupled = s.kind() == proto::OPTIMIZER_ADAMW;
  AdamConstants c;
  c.scale = u.scale;
  c.l2 = decoupled ? 0.0f : static_cast<float>(s.weight_decay());
  c.decay = decoupled ? static_cast<float>(1.0 - s.lr() * u.fraction * s.weight_decay()) : 1.0f;
  c.beta1 = static_cast<float>(beta1);
  c.keep1 = static_cast<float>(1.0 - beta1);
  c.beta2 = static_cast<float>(beta2);
  c.keep2 = static_cast<float>(1.0 - beta2);
  const double correction1 = 1.0 - std::pow(s.beta1(), t);
  c.step_size = static_cast<float>(s.lr() * u.fraction / correction1);
  c.root_correction2 = static_cast<float>(std::sqrt(1.0 - std::pow(s.beta2(), t)));
  c.eps = static_cast<float>(s.eps());
  if (whole) {
    AdamLoop(c, grad, weight_in, weight_out, first, second, n);
    return;
  }
  c.fraction = u.fraction;
  c.rest = 1.0f - u.fraction;
  c.inv_correction1 = static_cast<float>(1.0 / correction1);
  AdamFractionLoop(c, grad, weight_in, weight_out, first, second, n);
}

}  // namespace

void PredictScriptRun(const proto::OptimizerSettings& s, double steps, float fraction,
                      int updates, const float* weights, const float* first, const float* second,
                      float* out, size_t n) {
  if (s.kind() == proto::OPTIMIZER_SGD || s.kind() == proto::OPTIMIZER_AVERAGE ||
      second == nullptr || !(steps > 0)) {
    std::copy(weights, weights + n, out);
    return;
  }
  const float move = static_cast<float>(s.lr() * fraction * updates /
                                        (1.0 - std::pow(s.beta1(), steps)));
  const float root_correction2 = static_cast<float>(std::sqrt(1.0 - std::pow(s.beta2(), steps)));
  const float eps = static_cast<float>(s.eps());
  const float decay = s.kind() == proto::OPTIMIZER_ADAMW
                          ? static_cast<float>(std::pow(1.0 - s.lr() * fraction * s.weight_decay(),
                                                        updates))
                          : 1.0f;
  for (size_t i = 0; i < n; ++i) {
    out[i] = weights[i] * decay -
             move * first[i] / (std::sqrt(second[i]) / root_correction2 + eps);
  }
}

std::optional<SgdOptions> AsServerSgd(const std::vector<wire::OptimizerRun>& runs) {
  if (runs.empty()) return std::nullopt;
  const proto::OptimizerSettings& first = runs.front().settings;
  for (const wire::OptimizerRun& run : runs) {
    const proto::OptimizerSettings& s = run.settings;
    if (s.kind() != proto::OPTIMIZER_SGD || s.dampening() != 0 || s.nesterov() ||
        s.lr() != first.lr() || s.momentum() != first.momentum() ||
        s.weight_decay() != first.weight_decay()) {
      return std::nullopt;
    }
  }
  SgdOptions sgd;
  sgd.learning_rate = static_cast<float>(first.lr());
  sgd.momentum = static_cast<float>(first.momentum());
  sgd.weight_decay = static_cast<float>(first.weight_decay());
  return sgd;
}

void ApplyScriptOptimizer(const proto::OptimizerSettings& s, const ScriptUpdate& update,
                          const float* grad, const float* weight_in, float* weight_out,
                          float* first, float* second, size_t n) {
  if (s.kind() == proto::OPTIMIZER_AVERAGE) {
    for (size_t i = 0; i < n; ++i) weight_out[i] = update.scale * grad[i];
  } else if (s.kind() == proto::OPTIMIZER_SGD) {
    ApplySgd(s, update, grad, weight_in, weight_out, first, n);
  } else {
    ApplyAdam(s, update, grad, weight_in, weight_out, first, second, n);
  }
}

}  // namespace r2sp
