// SGD with momentum and weight decay, PyTorch's formulation:
//   d = scale * g + weight_decay * w;  m = momentum * m + d;  w = w - lr * m
// `scale` turns a sum of gradients into the average the update should use (BSP: 1/W).
#ifndef R2SP_SERVER_SGD_H_
#define R2SP_SERVER_SGD_H_

#include <cstddef>

namespace r2sp {

struct SgdOptions {
  float learning_rate = 0.01f;
  float momentum = 0.9f;      // 0 disables the momentum buffer
  float weight_decay = 0.0f;
};

// An update that carries `fraction` (0 < f <= 1) of a nominal global-batch step, as an
// asynchronous push of b_i samples does when the global batch is B (f = b_i / B). Momentum then
// decays per sample, not per update (mu^f); the gradient and weight-decay terms enter the buffer
// scaled by (1 - mu^f) / (1 - mu) and the rate by f. The buffer keeps the meaning it has with
// whole steps (steady state g / (1 - mu)), so pushes of different fractions mix, and 1/f such
// updates move the weights as one whole step does. This lets every mode share one set of
// hyperparameters. f == 1 gives `options` unchanged and scale 1.
struct FractionalStep {
  SgdOptions options;
  float grad_scale = 1.0f;  // the `scale` to pass to SgdApply
};
// REQUIRES: 0 < fraction <= 1, 0 <= options.momentum < 1.
FractionalStep StepForFraction(const SgdOptions& options, float fraction);

// Updates [weight_in, weight_in+n) into weight_out (which may equal weight_in: in place).
// `momentum_buffer` is updated in place and is unused when options.momentum == 0.
// REQUIRES: grad and momentum_buffer do not overlap the weights.
void SgdApply(const SgdOptions& options, float scale, const float* grad,
              const float* weight_in, float* weight_out, float* momentum_buffer, size_t n);

}  // namespace r2sp

#endif  // R2SP_SERVER_SGD_H_
