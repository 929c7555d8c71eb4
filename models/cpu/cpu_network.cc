// The CPU backend: executes a Graph with oneDNN primitives. For each (batch size, mode) an
// execution plan is built once — primitives, memories, reorders, the backward pass with
// gradient accumulation where a node has several consumers — and reused every step.
// Activations stay in the layouts oneDNN prefers (blocked); parameters and gradients are
// read from and written to the flat plain-layout arrays, with reorders only where a
// primitive wants another layout.
#include "models/cpu/cpu_network.h"

#include <omp.h>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "models/cpu/cpu_network_internal.h"

namespace r2sp::models {
namespace cpu_internal {

std::unique_ptr<Plan> CpuNetwork::BuildPlan(int batch, bool training) {
  auto plan = std::make_unique<Plan>();
  plan->batch = batch;
  plan->training = training;
  plan->nodes.resize(graph_.nodes.size());
  const std::vector<ParamGroup> groups = graph_.ParamGroups();
  auto needed = groups.begin();
  for (size_t i = 0; i < graph_.nodes.size(); ++i) {
    if (needed != groups.end() && needed->node == static_cast<int>(i)) {
      if (training) AddParamsNeededStep(*plan, *needed);
      ++needed;
    }
    BuildForward(*plan, static_cast<int>(i));
  }
  if (training) {
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      plan->nodes[i].diff = memory(plan->nodes[i].out.get_desc(), engine_);
    }
    std::vector<bool> written(graph_.nodes.size(), false);
    written.back() = true;  // the loss writes the logits' gradient
    auto group = groups.rbegin();
    for (int i = static_cast<int>(graph_.nodes.size()) - 1; i > 0; --i) {
      BuildBackward(*plan, i, written);
      if (group != groups.rend() && group->node == i) AddGradientReadyStep(*plan, *group++);
    }
  }
  VLOG(1) << "built " << (training ? "training" : "inference") << " plan for batch " << batch;
  return plan;
}

void CpuNetwork::AddParamsNeededStep(Plan& plan, const ParamGroup& group) {
  plan.forward.push_back([this, offset = group.offset, count = group.count] {
    if (params_needed_) params_needed_(offset, count);
  });
}

void CpuNetwork::AddGradientReadyStep(Plan& plan, const ParamGroup& group) {
  plan.backward.push_back([this, offset = group.offset, count = group.count] {
    if (!gradient_ready_) return;
    stream_.wait();  // the layer's gradients are in `grads`
    gradient_ready_(offset, count);
  });
}

}  // namespace cpu_internal

absl::StatusOr<std::unique_ptr<Network>> CreateCpuNetwork(const Graph& graph,
                                                          const CpuOptions& options) {
  if (graph.nodes.size() < 2 || graph.nodes[0].op != Op::kInput) {
    return absl::InvalidArgumentError("a graph starts with its input and has a layer");
  }
  if (options.threads > 0) omp_set_num_threads(options.threads);
  try {
    return std::unique_ptr<Network>(new cpu_internal::CpuNetwork(graph, options));
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat("oneDNN: ", e.what()));
  }
}

}  // namespace r2sp::models
