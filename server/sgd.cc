// The optimizer's inner loops. Written so GCC vectorises them (-O3 in BUILD); FMA clones
// (Haswell, Skylake-AVX512) are chosen at run time where the CPU has them. They round where
// torch's vectorised SGD rounds (-ffp-contract=off in BUILD; its adds with a factor are fused
// multiply-adds): d = fma(w, wd, scale * g); m = m * mu + d; w = fma(m, -lr, w), so a job's
// updates equal torch.optim.SGD's bit for bit.
#include "server/sgd.h"

#include <cmath>
#include <cstdint>

#include "common/target_clones.h"

namespace r2sp {
namespace {

R2SP_FMA_TARGET_CLONES
void MomentumInPlace(float lr, float mu, float wd, float scale, const float* __restrict g,
                     float* __restrict w, float* __restrict m, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float d = std::fma(w[i], wd, scale * g[i]);
    const float v = m[i] * mu + d;
    m[i] = v;
    w[i] = std::fma(v, -lr, w[i]);
  }
}

R2SP_FMA_TARGET_CLONES
void MomentumOutOfPlace(float lr, float mu, float wd, float scale, const float* __restrict g,
                        const float* __restrict w_in, float* __restrict w_out,
                        float* __restrict m, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float d = std::fma(w_in[i], wd, scale * g[i]);
    const float v = m[i] * mu + d;
    m[i] = v;
    w_out[i] = std::fma(v, -lr, w_in[i]);
  }
}

R2SP_FMA_TARGET_CLONES
void PlainInPlace(float lr, float wd, float scale, const float* __restrict g,
                  float* __restrict w, size_t n) {
  for (size_t i = 0; i < n; ++i) w[i] = std::fma(std::fma(w[i], wd, scale * g[i]), -lr, w[i]);
}

R2SP_FMA_TARGET_CLONES
void PlainOutOfPlace(float lr, float wd, float scale, const float* __restrict g,
                     const float* __restrict w_in, float* __restrict w_out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    w_out[i] = std::fma(std::fma(w_in[i], wd, scale * g[i]), -lr, w_in[i]);
  }
}

// Weights may be updated in place (weight_in == weight_out), so they are not __restrict.
R2SP_FMA_TARGET_CLONES
void MomentumKeepingStep(float lr, float mu, float wd, float scale, float inv_scale,
                         const float* __restrict g, const float* weight_in, float* weight_out,
                         float* __restrict m, float* __restrict step, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float w = weight_in[i];
    const float d = std::fma(w, wd, scale * g[i]);
    const float v = m[i] * mu + d;
    step[i] = d * inv_scale;
    m[i] = v;
    weight_out[i] = std::fma(v, -lr, w);
  }
}

// MomentumKeepingStep and Predict over its results in one pass: the same expressions on the
// same values (the stored floats), so the same results bit for bit.
R2SP_FMA_TARGET_CLONES
void MomentumKeepingStepPredicting(float lr, float mu, float wd, float scale, float inv_scale,
                                   float a, float c, const float* __restrict g,
                                   const float* weight_in, float* weight_out,
                                   float* __restrict m, float* __restrict step,
                                   float* __restrict predicted, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float w = weight_in[i];
    const float d = std::fma(w, wd, scale * g[i]);
    const float v = m[i] * mu + d;
    const float u = d * inv_scale;
    const float next = std::fma(v, -lr, w);
    step[i] = u;
    m[i] = v;
    weight_out[i] = next;
    predicted[i] = next - a * v - c * u;
  }
}

R2SP_TARGET_CLONES
void Predict(float a, float c, const float* __restrict w, const float* __restrict m,
             const float* __restrict u, float* __restrict out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = w[i] - a * m[i] - c * u[i];
}

// The zero-gradient update. Weights may be updated in place, so they are not __restrict.
R2SP_FMA_TARGET_CLONES
void DecayOnly(float lr, float mu, float wd, float inv_scale, const float* weight_in,
               float* weight_out, float* __restrict m, float* __restrict step, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float w = weight_in[i];
    const float d = wd * w;
    const float v = m == nullptr ? d : m[i] * mu + d;
    if (m != nullptr) m[i] = v;
    if (step != nullptr) step[i] = d * inv_scale;
    weight_out[i] = std::fma(v, -lr, w);
  }
}

}  // namespace

void SgdApplyNoGradient(const SgdOptions& options, float scale, const float* weight_in,
                        float* weight_out, float* momentum_buffer, float* step_out, size_t n) {
  float* m = options.momentum != 0.0f ? momentum_buffer : nullptr;
  const float inv_scale = step_out != nullptr ? 1.0f / scale : 0.0f;
  DecayOnly(options.learning_rate, options.momentum, options.weight_decay, inv_scale, weight_in,
            weight_out, m, step_out, n);
}

void SgdAddSparse(const SgdOptions& options, float scale, const uint32_t* indices,
                  const float* values, size_t count, float* weights, float* momentum_buffer,
                  float* step_out) {
  const float lr = options.learning_rate;
  const bool momentum = options.momentum != 0.0f;
  for (size_t j = 0; j < count; ++j) {
    const uint32_t i = indices[j];
    const float d = scale * values[j];
    if (momentum) momentum_buffer[i] += d;
    weights[i] = std::fma(d, -lr, weights[i]);
    if (step_out != nullptr) step_out[i] += values[j];
  }
}

Prediction PredictionFor(const SgdOptions& options, float update_fraction, int updates) {
  const FractionalStep step = StepForFraction(options, update_fraction);
  const double a = step.options.momentum;
  double momentum_sum = 0;  // sum_{j=1..updates} a^j
  double step_sum = 0;      // sum_{j=1..updates} sum_{k=0..j-1} a^k
  double a_j = 1;           // a^(j-1), then a^j
  double partial = 0;       // sum_{k=0..j-1} a^k
  for (int j = 1; j <= updates; ++j) {
    partial += a_j;
    a_j *= a;
    momentum_sum += a_j;
    step_sum += partial;
  }
  const double lr = step.options.learning_rate;  // lr * phi
  Prediction p;
  p.momentum_coeff = static_cast<float>(lr * momentum_sum);
  p.step_coeff = static_cast<float>(lr * step.grad_scale * step_sum);
  return p;
}

void PredictWeights(const Prediction& p, const float* weights, const float* momentum,
                    const float* step, float* out, size_t n) {
  Predict(p.momentum_coeff, p.step_coeff, weights, momentum, step, out, n);
}

void SgdApplyKeepingStep(const SgdOptions& options, float scale, const float* grad,
                         const float* weight_in, float* weight_out, float* momentum_buffer,
                         float* step_out, size_t n) {
  MomentumKeepingStep(options.learning_rate, options.momentum, options.weight_decay, scale,
                      1.0f / scale, grad, weight_in, weight_out, momentum_buffer, step_out, n);
}

void SgdApplyPredicting(const SgdOptions& options, float scale, const Prediction& p,
                        const float* grad, const float* weight_in, float* weight_out,
                        float* momentum_buffer, float* step_out, float* predicted_out, size_t n) {
  MomentumKeepingStepPredicting(options.learning_rate, options.momentum, options.weight_decay,
                                scale, 1.0f / scale, p.momentum_coeff, p.step_coeff, grad,
                                weight_in, weight_out, momentum_buffer, step_out, predicted_out,
                                n);
}

FractionalStep StepForFraction(const SgdOptions& options, float fraction) {
  FractionalStep step{options, 1.0f};
  if (fraction >= 1.0f) return step;
  const double mu = options.momentum;
  const double mu_f = std::pow(mu, static_cast<double>(fraction));
  const double c = mu == 0.0 ? 1.0 : (1.0 - mu_f) / (1.0 - mu);
  step.options.learning_rate = options.learning_rate * fraction;
  step.options.momentum = static_cast<float>(mu_f);
  step.options.weight_decay = static_cast<float>(options.weight_decay * c);
  step.grad_scale = static_cast<float>(c);
  return step;
}

void SgdApply(const SgdOptions& options, float scale, const float* grad,
              const float* weight_in, float* weight_out, float* momentum_buffer, size_t n) {
  const float lr = options.learning_rate;
  const float wd = options.weight_decay;
  if (options.momentum != 0.0f) {
    if (weight_in == weight_out) {
      MomentumInPlace(lr, options.momentum, wd, scale, grad, weight_out, momentum_buffer, n);
    } else {
      MomentumOutOfPlace(lr, options.momentum, wd, scale, grad, weight_in, weight_out,
                         momentum_buffer, n);
    }
  } else if (weight_in == weight_out) {
    PlainInPlace(lr, wd, scale, grad, weight_out, n);
  } else {
    PlainOutOfPlace(lr, wd, scale, grad, weight_in, weight_out, n);
  }
}

}  // namespace r2sp
