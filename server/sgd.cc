// The optimizer's inner loops. Written so GCC vectorises them (-O3 in BUILD); AVX2 and
// AVX-512 clones are chosen at run time where the CPU has them.
#include "server/sgd.h"

#include <cmath>

namespace r2sp {
namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define R2SP_TARGET_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define R2SP_TARGET_CLONES
#endif

R2SP_TARGET_CLONES
void MomentumInPlace(float lr, float mu, float wd, float scale, const float* __restrict g,
                     float* __restrict w, float* __restrict m, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float d = scale * g[i] + wd * w[i];
    const float v = mu * m[i] + d;
    m[i] = v;
    w[i] = w[i] - lr * v;
  }
}

R2SP_TARGET_CLONES
void MomentumOutOfPlace(float lr, float mu, float wd, float scale, const float* __restrict g,
                        const float* __restrict w_in, float* __restrict w_out,
                        float* __restrict m, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float d = scale * g[i] + wd * w_in[i];
    const float v = mu * m[i] + d;
    m[i] = v;
    w_out[i] = w_in[i] - lr * v;
  }
}

R2SP_TARGET_CLONES
void PlainInPlace(float lr, float wd, float scale, const float* __restrict g,
                  float* __restrict w, size_t n) {
  for (size_t i = 0; i < n; ++i) w[i] = w[i] - lr * (scale * g[i] + wd * w[i]);
}

R2SP_TARGET_CLONES
void PlainOutOfPlace(float lr, float wd, float scale, const float* __restrict g,
                     const float* __restrict w_in, float* __restrict w_out, size_t n) {
  for (size_t i = 0; i < n; ++i) w_out[i] = w_in[i] - lr * (scale * g[i] + wd * w_in[i]);
}

}  // namespace

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
