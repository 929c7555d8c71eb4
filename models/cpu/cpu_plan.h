// The CPU backend's execution plan for one (batch size, mode) — per-node oneDNN memories and
// primitive descriptors, the forward and backward step lists, the bindings to the flat
// parameter and gradient arrays — and PlanSteps, the oneDNN engine and stream a network's
// plans run on with the helpers that append steps to them. Filled by ForwardPrimitives
// (cpu_forward.h) and BackwardPrimitives (cpu_backward.h), run by CpuNetwork
// (cpu_network.cc). Not part of the models API: callers use CreateNetwork (models/backend.h).
#ifndef R2SP_MODELS_CPU_CPU_PLAN_H_
#define R2SP_MODELS_CPU_CPU_PLAN_H_

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "models/graph.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace r2sp::models::cpu_internal {

using dnnl::memory;
using Tag = memory::format_tag;
using Dt = memory::data_type;
using Dims = memory::dims;
using Args = std::unordered_map<int, memory>;
using Steps = std::vector<std::function<void()>>;

// models/graph.h's batch-norm constants as the floats oneDNN and our loops take.
constexpr float kBnEpsilon = static_cast<float>(kBatchNormEpsilon);
constexpr float kBnMomentum = static_cast<float>(kBatchNormMomentum);

inline memory::desc Desc(const Dims& dims, Tag tag) { return memory::desc(dims, Dt::f32, tag); }
inline Dims BatchDims(int64_t n, const Shape& s) { return {n, s.c, s.h, s.w}; }

// Per-node state of one plan.
struct NodePlan {
  memory out;   // forward output
  memory diff;  // d(loss)/d(out), same layout (training plans only)
  memory src;   // the input as the main primitive reads it (possibly a reordered copy)
  // Parameters: plain memories bound to the flat arrays each step.
  memory user_w, user_b, user_dw, user_db;
  memory prim_w;   // forward weights in the primitive's layout (== user_w if it is plain)
  memory bwd_w;    // weights in the backward-data primitive's layout
  memory prim_dw;  // weight gradient in the backward-weights layout (== user_dw if plain)
  memory mean, variance, workspace;
  // Forward primitive descriptors of training plans, the hints their backward needs.
  dnnl::convolution_forward::primitive_desc conv_pd;
  dnnl::inner_product_forward::primitive_desc ip_pd;
  dnnl::eltwise_forward::primitive_desc relu_pd;
  dnnl::pooling_forward::primitive_desc pool_pd;
  dnnl::batch_normalization_forward::primitive_desc bn_pd;
};

struct Plan {
  int batch;
  bool training;
  std::vector<NodePlan> nodes;
  Steps forward;                                           // executed in order
  Steps backward;                                          // executed in order
  std::vector<std::pair<memory, int64_t>> param_bindings;  // (memory, offset in params)
  std::vector<std::pair<memory, int64_t>> grad_bindings;   // (memory, offset in grads)
  memory input;
};

// The engine and stream every plan of one network uses, and the step-building helpers that
// forward and backward share. Steps made by Exec point back at this object: it must outlive
// the plans (CpuNetwork owns both). Not thread-safe, as the network itself.
class PlanSteps {
 public:
  // `graph` fixes each parameter's offset in the flat arrays.
  explicit PlanSteps(const Graph& graph);

  const dnnl::engine& engine() const { return engine_; }
  dnnl::stream& stream() { return stream_; }
  // Where parameter `index` starts in the flat parameter (and gradient) array.
  int64_t param_offset(int index) const { return param_offsets_[index]; }

  // Appends a step running `prim` with `args` on the stream.
  void Exec(Steps& steps, dnnl::primitive prim, Args args);
  // `m` in layout `want`: m itself, or a new memory filled by a reorder step appended here.
  memory Converted(Steps& steps, const memory& m, const memory::desc& want);
  // Plain memory for parameter `index` with `dims` in `tag`, bound each step to the
  // parameters (or with `grad`, the gradients) at the parameter's offset.
  memory ParamMemory(Plan& plan, int index, const Dims& dims, Tag tag, bool grad) const;

 private:
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::vector<int64_t> param_offsets_;
};

}  // namespace r2sp::models::cpu_internal

#endif  // R2SP_MODELS_CPU_CPU_PLAN_H_
