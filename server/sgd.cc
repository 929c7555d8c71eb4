// The optimizer's inner loops. Written so GCC vectorises them (-O3 in BUILD); AVX2 and
// AVX-512 clones are chosen at run time where the CPU has them.
#include "server/sgd.h"

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
