// A straightforward double-precision implementation of a Graph's forward pass and loss, the
// reference the backends' gradients are checked against (by finite differences).
#ifndef R2SP_TESTS_MODELS_REFERENCE_NETWORK_H_
#define R2SP_TESTS_MODELS_REFERENCE_NETWORK_H_

#include <cstdint>
#include <vector>

#include "models/graph.h"

namespace r2sp::models::testing {

struct ReferenceOptions {
  bool training = true;          // batch statistics and dropout (else running statistics)
  uint64_t dropout_seed = 1;
  int64_t step = 0;
  // Running statistics per node (eval mode), as the backends keep them.
  std::vector<std::vector<double>> running_mean, running_var;
};

// Mean softmax cross-entropy of the batch; fills `logits` (batch x classes) if not null and,
// in training mode, the batch means and biased variances of every batch-norm node.
double ReferenceLoss(const Graph& graph, const std::vector<double>& params,
                     const std::vector<double>& images, const std::vector<int32_t>& labels,
                     int batch, const ReferenceOptions& options, std::vector<double>* logits,
                     std::vector<std::vector<double>>* bn_mean = nullptr,
                     std::vector<std::vector<double>>* bn_var = nullptr);

}  // namespace r2sp::models::testing

#endif  // R2SP_TESTS_MODELS_REFERENCE_NETWORK_H_
