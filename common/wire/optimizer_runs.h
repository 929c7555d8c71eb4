// The training script's optimizer on the wire (proto PartitionOptimizer in a PUSH header), both
// sides: the worker cuts its parameter groups' settings into each partition's runs of elements
// (a partition may hold pieces of several tensors, each in its own group); the server checks
// what it is sent before any of it is applied: a kind it applies, every setting in range
// (torch's own bounds), run ends that rise strictly and end at the partition's size.
#ifndef R2SP_COMMON_WIRE_OPTIMIZER_RUNS_H_
#define R2SP_COMMON_WIRE_OPTIMIZER_RUNS_H_

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model_layout.h"
#include "proto/messages.pb.h"

namespace r2sp::wire {

// [begin, end) of a partition, updated with `settings`.
struct OptimizerRun {
  size_t begin = 0;
  size_t end = 0;
  proto::OptimizerSettings settings;
};

// InvalidArgument naming the setting, unless `settings` is one the servers apply: kind SGD,
// Adam, AdamW or AVERAGE; lr and weight_decay finite and >= 0; SGD momentum in [0, 1),
// dampening in [0, 1], nesterov only with momentum > 0 and dampening 0; Adam betas in [0, 1),
// eps > 0.
absl::Status CheckOptimizerSettings(const proto::OptimizerSettings& settings);

// The runs of a partition of `num_elements` values. InvalidArgument for no runs, ends that do
// not rise strictly or do not end at num_elements, or settings CheckOptimizerSettings refuses.
absl::StatusOr<std::vector<OptimizerRun>> DecodeOptimizerRuns(
    const proto::PartitionOptimizer& optimizer, size_t num_elements);

// Every partition's runs (indexed by key) for a model whose tensor i is in parameter group
// tensor_groups[i], group g having settings groups[g]; consecutive elements of one group make
// one run. InvalidArgument for a count of tensor_groups other than the layout's tensors, a
// group index out of range, or settings CheckOptimizerSettings refuses.
absl::StatusOr<std::vector<proto::PartitionOptimizer>> EncodeOptimizerRuns(
    const ModelLayout& layout, const std::vector<int>& tensor_groups,
    const std::vector<proto::OptimizerSettings>& groups);

}  // namespace r2sp::wire

#endif  // R2SP_COMMON_WIRE_OPTIMIZER_RUNS_H_
