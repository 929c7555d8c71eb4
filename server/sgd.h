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

// Updates [weight_in, weight_in+n) into weight_out (which may equal weight_in: in place).
// `momentum_buffer` is updated in place and is unused when options.momentum == 0.
// REQUIRES: grad and momentum_buffer do not overlap the weights.
void SgdApply(const SgdOptions& options, float scale, const float* grad,
              const float* weight_in, float* weight_out, float* momentum_buffer, size_t n);

}  // namespace r2sp

#endif  // R2SP_SERVER_SGD_H_
