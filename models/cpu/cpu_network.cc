// The CPU backend: executes a Graph with oneDNN primitives. For each (batch size, mode) an
// execution plan (cpu_plan.h) is built once — ForwardPrimitives and BackwardPrimitives append
// each node's primitives, memories and reorders, with gradient accumulation where a node has
// several consumers — and reused every step. Activations stay in the layouts oneDNN prefers
// (blocked); parameters and gradients are read from and written to the flat plain-layout
// arrays, with reorders only where a primitive wants another layout.
#include "models/cpu/cpu_network.h"

#include <omp.h>

#include <algorithm>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "models/cpu/cpu_backward.h"
#include "models/cpu/cpu_forward.h"
#include "models/cpu/cpu_plan.h"
#include "models/loss.h"

namespace r2sp::models {
namespace cpu_internal {
namespace {

// Runs the plans; owns what their steps point at (steps_, running_, the primitive builders).
// Not thread-safe: one step at a time, as Network requires.
class CpuNetwork : public Network {
 public:
  CpuNetwork(Graph graph, const CpuOptions& options)
      : Network(std::move(graph)),
        steps_(graph_),
        forward_(graph_, steps_, &running_, options.seed, &step_),
        backward_(graph_, steps_) {
    running_.mean.resize(graph_.nodes.size());
    running_.var.resize(graph_.nodes.size());
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      if (graph_.nodes[i].op == Op::kBatchNorm) {
        running_.mean[i].assign(graph_.nodes[i].out.c, 0.0f);
        running_.var[i].assign(graph_.nodes[i].out.c, 1.0f);
      }
    }
  }

  absl::StatusOr<float> TrainStep(const float* params, const float* images, const int32_t* labels,
                                  int batch, float* grads) override {
    if (batch < 1) return absl::InvalidArgumentError("batch must be >= 1");
    Plan& plan = PlanFor(batch, /*training=*/true);
    Bind(plan, params, images, grads);
    for (auto& step : plan.forward) step();
    const Node& last = graph_.nodes.back();
    R2SP_ASSIGN_OR_RETURN(
        const LossResult loss,
        SoftmaxCrossEntropy(static_cast<const float*>(plan.nodes.back().out.get_data_handle()),
                            labels, batch, last.out.c,
                            static_cast<float*>(plan.nodes.back().diff.get_data_handle())));
    for (auto& step : plan.backward) step();
    steps_.stream().wait();
    ++step_;
    return static_cast<float>(loss.loss_sum / batch);
  }

  absl::StatusOr<EvalResult> Evaluate(const float* params, const float* images,
                                      const int32_t* labels, int batch) override {
    if (batch < 1) return absl::InvalidArgumentError("batch must be >= 1");
    Plan& plan = PlanFor(batch, /*training=*/false);
    Bind(plan, params, images, nullptr);
    for (auto& step : plan.forward) step();
    steps_.stream().wait();
    R2SP_ASSIGN_OR_RETURN(
        const LossResult loss,
        SoftmaxCrossEntropy(static_cast<const float*>(plan.nodes.back().out.get_data_handle()),
                            labels, batch, graph_.nodes.back().out.c, nullptr));
    return EvalResult{loss.correct, loss.loss_sum};
  }

  bool CallsParamsNeeded() const override { return true; }

  const float* logits() const override {
    return last_plan_ == nullptr
               ? nullptr
               : static_cast<const float*>(last_plan_->nodes.back().out.get_data_handle());
  }

  std::vector<float> BatchNormStatistics() const override {
    std::vector<float> stats;
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      stats.insert(stats.end(), running_.mean[i].begin(), running_.mean[i].end());
      stats.insert(stats.end(), running_.var[i].begin(), running_.var[i].end());
    }
    return stats;
  }

  absl::Status SetBatchNormStatistics(const std::vector<float>& stats) override {
    R2SP_RETURN_IF_ERROR(CheckStatisticsSize(stats.size()));
    // In place: the plans' oneDNN memories and steps point into these vectors.
    auto at = stats.begin();
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      for (std::vector<float>* v : {&running_.mean[i], &running_.var[i]}) {
        std::copy(at, at + v->size(), v->begin());
        at += v->size();
      }
    }
    return absl::OkStatus();
  }

 private:
  void Bind(Plan& plan, const float* params, const float* images, float* grads) {
    plan.input.set_data_handle(const_cast<float*>(images));
    for (auto& [mem, offset] : plan.param_bindings) {
      mem.set_data_handle(const_cast<float*>(params + offset));
    }
    if (grads != nullptr) {
      for (auto& [mem, offset] : plan.grad_bindings) mem.set_data_handle(grads + offset);
    }
    last_plan_ = &plan;
  }

  Plan& PlanFor(int batch, bool training) {
    auto key = std::make_pair(batch, training);
    auto it = plans_.find(key);
    if (it == plans_.end()) it = plans_.emplace(key, BuildPlan(batch, training)).first;
    return *it->second;
  }

  std::unique_ptr<Plan> BuildPlan(int batch, bool training);
  // Before a node's forward in training plans: waits for its parameters (params_needed_).
  void AddParamsNeededStep(Plan& plan, const ParamGroup& group);
  // After a node's backward: reports its parameters as final (gradient_ready_).
  void AddGradientReadyStep(Plan& plan, const ParamGroup& group);

  // Declared before the plans, whose steps point into them, so that they are destroyed after.
  PlanSteps steps_;
  RunningStatistics running_;  // resized once, in the constructor
  ForwardPrimitives forward_;
  BackwardPrimitives backward_;
  std::map<std::pair<int, bool>, std::unique_ptr<Plan>> plans_;
  Plan* last_plan_ = nullptr;
};

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
    forward_.Build(*plan, static_cast<int>(i));
  }
  if (training) {
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      plan->nodes[i].diff = memory(plan->nodes[i].out.get_desc(), steps_.engine());
    }
    std::vector<bool> written(graph_.nodes.size(), false);
    written.back() = true;  // the loss writes the logits' gradient
    auto group = groups.rbegin();
    for (int i = static_cast<int>(graph_.nodes.size()) - 1; i > 0; --i) {
      backward_.Build(*plan, i, written);
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
    steps_.stream().wait();  // the layer's gradients are in `grads`
    gradient_ready_(offset, count);
  });
}

}  // namespace
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
