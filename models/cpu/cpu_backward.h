// BackwardPrimitives: builds each node's backward steps into a CPU training plan
// (cpu_plan.h), in reverse node order — oneDNN backward-data and backward-weights primitives,
// the gradients' reorders into the flat gradient array, and accumulation where a node has
// several consumers. One function per op. Not part of the models API: callers use
// CreateNetwork (models/backend.h).
#ifndef R2SP_MODELS_CPU_CPU_BACKWARD_H_
#define R2SP_MODELS_CPU_CPU_BACKWARD_H_

#include <vector>

#include "models/cpu/cpu_plan.h"
#include "models/graph.h"

namespace r2sp::models::cpu_internal {

// Not thread-safe, as the network that owns it.
class BackwardPrimitives {
 public:
  // Both borrowed: `graph` and `steps` must outlive this object and every plan it builds
  // (CpuNetwork owns them all).
  BackwardPrimitives(const Graph& graph, PlanSteps& steps);

  // Appends node i's backward steps to plan.backward. REQUIRES: a training plan whose forward
  // ForwardPrimitives built, every node's `diff` allocated, nodes visited from the last to the
  // second. `written[k]`: node k's gradient has a writer already, so later ones accumulate;
  // Build sets it for the inputs it writes.
  void Build(Plan& plan, int i, std::vector<bool>& written);

 private:
  // Where a backward primitive should write d(loss)/d(input `in`) in layout `desc`, plus the
  // steps (`post`) that fold it into the input's gradient after the primitive ran. The first
  // writer (in backward order) initialises the gradient; later ones add to it.
  memory DiffTarget(Plan& plan, std::vector<bool>& written, int in, const memory::desc& desc,
                    Steps* post);
  void BackwardConv(Plan& plan, int i, std::vector<bool>& written);
  void BackwardLinear(Plan& plan, int i, std::vector<bool>& written);
  void BackwardRelu(Plan& plan, int i, std::vector<bool>& written);
  void BackwardPool(Plan& plan, int i, std::vector<bool>& written);
  void BackwardBatchNorm(Plan& plan, int i, std::vector<bool>& written);
  void BackwardDropout(Plan& plan, int i, std::vector<bool>& written);
  void BackwardFlatten(Plan& plan, int i, std::vector<bool>& written);
  void BackwardAdd(Plan& plan, int i, std::vector<bool>& written);

  const Graph& graph_;
  PlanSteps& steps_;
};

}  // namespace r2sp::models::cpu_internal

#endif  // R2SP_MODELS_CPU_CPU_BACKWARD_H_
