// Softmax cross-entropy over a batch of logits (plain N x K), shared by the backends' host
// code and tests: loss, gradient with respect to the logits, and accuracy.
#ifndef R2SP_MODELS_LOSS_H_
#define R2SP_MODELS_LOSS_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace r2sp::models {

struct LossResult {
  double loss_sum = 0;  // summed over the batch
  int64_t correct = 0;
};

// If `grad` is not null, writes d(mean loss)/d(logits) into it.
absl::StatusOr<LossResult> SoftmaxCrossEntropy(const float* logits, const int32_t* labels,
                                               int batch, int classes, float* grad);

}  // namespace r2sp::models

#endif  // R2SP_MODELS_LOSS_H_
