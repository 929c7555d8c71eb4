// See loss.h.
#include "models/loss.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace r2sp::models {

absl::StatusOr<LossResult> SoftmaxCrossEntropy(const float* logits, const int32_t* labels,
                                               int batch, int classes, float* grad) {
  LossResult result;
  const float inv_batch = 1.0f / static_cast<float>(batch);
  for (int n = 0; n < batch; ++n) {
    const int32_t label = labels[n];
    if (label < 0 || label >= classes) {
      return absl::InvalidArgumentError(absl::StrCat("label ", label, " of sample ", n,
                                                     " is outside [0, ", classes, ")"));
    }
    const float* z = logits + int64_t{n} * classes;
    const float max = *std::max_element(z, z + classes);
    double sum = 0;
    for (int k = 0; k < classes; ++k) sum += std::exp(static_cast<double>(z[k] - max));
    const double log_sum = std::log(sum);
    result.loss_sum += log_sum - (z[label] - max);
    if (std::max_element(z, z + classes) - z == label) ++result.correct;
    if (grad != nullptr) {
      float* g = grad + int64_t{n} * classes;
      for (int k = 0; k < classes; ++k) {
        const float p = static_cast<float>(std::exp(static_cast<double>(z[k] - max) - log_sum));
        g[k] = (p - (k == label ? 1.0f : 0.0f)) * inv_batch;
      }
    }
  }
  return result;
}

}  // namespace r2sp::models
