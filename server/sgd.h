// SGD with momentum and weight decay, PyTorch's formulation:
//   d = scale * g + weight_decay * w;  m = momentum * m + d;  w = w - lr * m
// `scale` turns a sum of gradients into the average the update should use (BSP: 1/W).
#ifndef R2SP_SERVER_SGD_H_
#define R2SP_SERVER_SGD_H_

#include <cstddef>
#include <cstdint>

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

// Where the weights will be after `updates` more asynchronous updates of `update_fraction` of a
// global-batch step each (0 < update_fraction <= 1), for delay compensation (r2sp: the other
// W - 1 workers' pushes that land before this worker's next one). Each of those updates decays
// the momentum buffer m and adds c * u, where u is the latest update's gradient plus weight
// decay (the best estimate of the gradients still to come), so
//   x = w - momentum_coeff * m - step_coeff * u
// with phi = update_fraction, a = mu^phi, c the fractional step's gradient scale:
//   momentum_coeff = lr * phi * sum_{j=1..updates} a^j
//   step_coeff     = lr * phi * c * sum_{j=1..updates} sum_{k=0..j-1} a^k
struct Prediction {
  float momentum_coeff = 0.0f;
  float step_coeff = 0.0f;
};
// REQUIRES: 0 < update_fraction <= 1, updates >= 1, 0 <= options.momentum < 1.
Prediction PredictionFor(const SgdOptions& options, float update_fraction, int updates);

// out[i] = weights[i] - p.momentum_coeff * momentum[i] - p.step_coeff * step[i].
void PredictWeights(const Prediction& p, const float* weights, const float* momentum,
                    const float* step, float* out, size_t n);

// Updates [weight_in, weight_in+n) into weight_out (which may equal weight_in: in place).
// `momentum_buffer` is updated in place and is unused when options.momentum == 0.
// REQUIRES: grad and momentum_buffer do not overlap the weights.
void SgdApply(const SgdOptions& options, float scale, const float* grad,
              const float* weight_in, float* weight_out, float* momentum_buffer, size_t n);

// SgdApply that also stores, in `step_out`, the update's gradient term per unit of gradient
// scale: (scale * g + weight_decay * w) / scale, the gradient plus weight decay of a whole step
// (for PredictWeights). REQUIRES: scale > 0; step_out overlaps nothing else.
void SgdApplyKeepingStep(const SgdOptions& options, float scale, const float* grad,
                         const float* weight_in, float* weight_out, float* momentum_buffer,
                         float* step_out, size_t n);

// SgdApplyKeepingStep that also writes, in `predicted_out`, the weights `p` predicts from the
// state it leaves (PredictWeights over the new weights, momentum and step): one pass where the
// update and a later PredictWeights take two, with the same values bit for bit.
// REQUIRES: as SgdApplyKeepingStep; predicted_out overlaps nothing else.
void SgdApplyPredicting(const SgdOptions& options, float scale, const Prediction& p,
                        const float* grad, const float* weight_in, float* weight_out,
                        float* momentum_buffer, float* step_out, float* predicted_out, size_t n);

// Sparse gradients (top-k and csc pushes) as two steps that together equal SgdApply on the
// dense gradient (up to float rounding order): first the update with a zero gradient, where
// momentum decays and weight decay applies to every weight; then each sent value's term,
//   m[i] += scale * g;  w[i] -= lr * scale * g;  step[i] += g.
// `step_out` (SgdApplyKeepingStep's buffer) may be null. SgdAddSparse updates `weights` in
// place (the first step's output). REQUIRES: scale > 0 when step_out is given.
void SgdApplyNoGradient(const SgdOptions& options, float scale, const float* weight_in,
                        float* weight_out, float* momentum_buffer, float* step_out, size_t n);
void SgdAddSparse(const SgdOptions& options, float scale, const uint32_t* indices,
                  const float* values, size_t count, float* weights, float* momentum_buffer,
                  float* step_out);

}  // namespace r2sp

#endif  // R2SP_SERVER_SGD_H_
