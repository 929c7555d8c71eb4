// The CPU backend's plan helpers (cpu_plan.h): the steps every forward and backward primitive
// is appended with.
#include "models/cpu/cpu_plan.h"

namespace r2sp::models::cpu_internal {

PlanSteps::PlanSteps(const Graph& graph) : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {
  param_offsets_.resize(graph.params.size());
  int64_t offset = 0;
  for (size_t i = 0; i < graph.params.size(); ++i) {
    param_offsets_[i] = offset;
    offset += graph.params[i].size();
  }
}

void PlanSteps::Exec(Steps& steps, dnnl::primitive prim, Args args) {
  steps.push_back([this, prim = std::move(prim), args = std::move(args)]() mutable {
    prim.execute(stream_, args);
  });
}

memory PlanSteps::Converted(Steps& steps, const memory& m, const memory::desc& want) {
  if (m.get_desc() == want) return m;
  memory out(want, engine_);
  Exec(steps, dnnl::reorder(m, out), {{DNNL_ARG_FROM, m}, {DNNL_ARG_TO, out}});
  return out;
}

memory PlanSteps::ParamMemory(Plan& plan, int index, const Dims& dims, Tag tag, bool grad) const {
  memory m(Desc(dims, tag), engine_, DNNL_MEMORY_NONE);
  (grad ? plan.grad_bindings : plan.param_bindings).emplace_back(m, param_offsets_[index]);
  return m;
}

}  // namespace r2sp::models::cpu_internal
