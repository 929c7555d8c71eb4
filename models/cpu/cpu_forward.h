// ForwardPrimitives: builds each node's forward steps into a CPU plan (cpu_plan.h) — oneDNN
// primitives with the reorders their layouts need, batch norm's running statistics, dropout
// masks. One function per op. Not part of the models API: callers use CreateNetwork
// (models/backend.h).
#ifndef R2SP_MODELS_CPU_CPU_FORWARD_H_
#define R2SP_MODELS_CPU_CPU_FORWARD_H_

#include <cstdint>
#include <vector>

#include "models/cpu/cpu_plan.h"
#include "models/graph.h"

namespace r2sp::models::cpu_internal {

// Batch norm's running mean and variance, one vector per node (empty but for batch-norm
// nodes), read by inference plans and updated by training plans in place.
struct RunningStatistics {
  std::vector<std::vector<float>> mean, var;
};

// Not thread-safe, as the network that owns it. The steps it builds point into `running`
// (whose vectors must never be resized) and read `*step` when they run.
class ForwardPrimitives {
 public:
  // All borrowed: `graph`, `steps`, `running` and `step` must outlive this object and every
  // plan it builds (CpuNetwork owns them all). `seed` and `*step` pick the dropout masks.
  ForwardPrimitives(const Graph& graph, PlanSteps& steps, RunningStatistics* running, uint64_t seed,
                    const int64_t* step);

  // Appends node i's forward steps to plan.forward and fills plan.nodes[i] (its output, and
  // in training plans what its backward needs). Nodes are built in order.
  void Build(Plan& plan, int i);

 private:
  void ForwardInput(Plan& plan, int i);
  void ForwardConv(Plan& plan, int i);
  void ForwardLinear(Plan& plan, int i);
  void ForwardRelu(Plan& plan, int i);
  void ForwardPool(Plan& plan, int i);  // max and global average
  void ForwardBatchNorm(Plan& plan, int i);
  void ForwardDropout(Plan& plan, int i);
  void ForwardFlatten(Plan& plan, int i);
  void ForwardAdd(Plan& plan, int i);

  const Graph& graph_;
  PlanSteps& steps_;
  RunningStatistics& running_;
  const uint64_t seed_;
  const int64_t& step_;
};

}  // namespace r2sp::models::cpu_internal

#endif  // R2SP_MODELS_CPU_CPU_FORWARD_H_
