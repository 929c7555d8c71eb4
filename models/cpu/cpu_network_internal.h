// The CPU backend's internals (models/cpu/cpu_network.cc has the overview): the per-(batch,
// mode) execution plan and the network class that builds and runs it. The plan's construction
// is split by job: cpu_network.cc (the plan and the entry point), cpu_forward.cc (each node's
// forward primitives), cpu_backward.cc (each node's backward primitives). Not part of the
// models API: callers use CreateNetwork (models/backend.h).
#ifndef R2SP_MODELS_CPU_CPU_NETWORK_INTERNAL_H_
#define R2SP_MODELS_CPU_CPU_NETWORK_INTERNAL_H_

#include <functional>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "models/cpu/cpu_network.h"
#include "models/loss.h"
#include "models/network.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace r2sp::models::cpu_internal {

using dnnl::memory;
using Tag = memory::format_tag;
using Dt = memory::data_type;
using Dims = memory::dims;
using Args = std::unordered_map<int, memory>;

// models/graph.h's batch-norm constants as the floats oneDNN and our loops take.
constexpr float kBnEpsilon = static_cast<float>(kBatchNormEpsilon);
constexpr float kBnMomentum = static_cast<float>(kBatchNormMomentum);

inline memory::desc Desc(const Dims& dims, Tag tag) { return memory::desc(dims, Dt::f32, tag); }

// Per-node state of one plan.
struct NodePlan {
  memory out;   // forward output
  memory diff;  // d(loss)/d(out), same layout (training plans only)
  memory src;   // the input as the main primitive reads it (possibly a reordered copy)
  // Parameters: plain memories bound to the flat arrays each step.
  memory user_w, user_b, user_dw, user_db;
  memory prim_w;    // forward weights in the primitive's layout (== user_w if it is plain)
  memory bwd_w;     // weights in the backward-data primitive's layout
  memory prim_dw;   // weight gradient in the backward-weights layout (== user_dw if plain)
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
  std::vector<std::function<void()>> forward;   // executed in order
  std::vector<std::function<void()>> backward;  // executed in order
  std::vector<std::pair<memory, int64_t>> param_bindings;  // (memory, offset in params)
  std::vector<std::pair<memory, int64_t>> grad_bindings;   // (memory, offset in grads)
  memory input;
};

class CpuNetwork : public Network {
 public:
  CpuNetwork(Graph graph, const CpuOptions& options)
      : Network(std::move(graph)), options_(options), engine_(dnnl::engine::kind::cpu, 0),
        stream_(engine_) {
    param_offsets_.resize(graph_.params.size());
    int64_t offset = 0;
    for (size_t i = 0; i < graph_.params.size(); ++i) {
      param_offsets_[i] = offset;
      offset += graph_.params[i].size();
    }
    running_mean_.resize(graph_.nodes.size());
    running_var_.resize(graph_.nodes.size());
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      if (graph_.nodes[i].op == Op::kBatchNorm) {
        running_mean_[i].assign(graph_.nodes[i].out.c, 0.0f);
        running_var_[i].assign(graph_.nodes[i].out.c, 1.0f);
      }
    }
  }

  absl::StatusOr<float> TrainStep(const float* params, const float* images,
                                  const int32_t* labels, int batch, float* grads) override {
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
    stream_.wait();
    ++step_;
    return static_cast<float>(loss.loss_sum / batch);
  }

  absl::StatusOr<EvalResult> Evaluate(const float* params, const float* images,
                                      const int32_t* labels, int batch) override {
    if (batch < 1) return absl::InvalidArgumentError("batch must be >= 1");
    Plan& plan = PlanFor(batch, /*training=*/false);
    Bind(plan, params, images, nullptr);
    for (auto& step : plan.forward) step();
    stream_.wait();
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
      stats.insert(stats.end(), running_mean_[i].begin(), running_mean_[i].end());
      stats.insert(stats.end(), running_var_[i].begin(), running_var_[i].end());
    }
    return stats;
  }

  absl::Status SetBatchNormStatistics(const std::vector<float>& stats) override {
    R2SP_RETURN_IF_ERROR(CheckStatisticsSize(stats.size()));
    // In place: the plans' oneDNN memories point into these vectors.
    auto at = stats.begin();
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      for (std::vector<float>* v : {&running_mean_[i], &running_var_[i]}) {
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

  void Exec(Plan& plan, std::vector<std::function<void()>>& steps, dnnl::primitive prim,
            Args args) {
    steps.push_back([this, prim = std::move(prim), args = std::move(args)]() mutable {
      prim.execute(stream_, args);
    });
  }

  // `m` in layout `want`: m itself, or a new memory filled by a reorder step.
  memory Converted(Plan& plan, std::vector<std::function<void()>>& steps, const memory& m,
                   const memory::desc& want) {
    if (m.get_desc() == want) return m;
    memory out(want, engine_);
    Exec(plan, steps, dnnl::reorder(m, out), {{DNNL_ARG_FROM, m}, {DNNL_ARG_TO, out}});
    return out;
  }

  // Plain memory for parameter `index` with `dims` in `tag`, bound to params each step.
  memory ParamMemory(Plan& plan, int index, const Dims& dims, Tag tag, bool grad) {
    memory m(Desc(dims, tag), engine_, DNNL_MEMORY_NONE);
    (grad ? plan.grad_bindings : plan.param_bindings).emplace_back(m, param_offsets_[index]);
    return m;
  }

  // Where a backward primitive should write d(loss)/d(input `in`) in layout `desc`, plus the
  // steps that fold it into the input's gradient after the primitive ran. The first writer
  // (in backward order) initialises the gradient; later ones add to it.
  memory DiffTarget(Plan& plan, std::vector<bool>& written, int in, const memory::desc& desc,
                    std::vector<std::function<void()>>* post) {
    NodePlan& target = plan.nodes[in];
    const memory::desc& want = target.diff.get_desc();
    if (!written[in]) {
      written[in] = true;
      if (desc == want) return target.diff;
      memory tmp(desc, engine_);
      Exec(plan, *post, dnnl::reorder(tmp, target.diff),
           {{DNNL_ARG_FROM, tmp}, {DNNL_ARG_TO, target.diff}});
      return tmp;
    }
    memory tmp(desc, engine_);
    memory addend = Converted(plan, *post, tmp, want);
    dnnl::binary::primitive_desc add_pd(
        dnnl::binary::desc(dnnl::algorithm::binary_add, want, want, want), engine_);
    Exec(plan, *post, dnnl::binary(add_pd),
         {{DNNL_ARG_SRC_0, target.diff}, {DNNL_ARG_SRC_1, addend}, {DNNL_ARG_DST, target.diff}});
    return tmp;
  }

  std::unique_ptr<Plan> BuildPlan(int batch, bool training);
  // Node i's forward steps (cpu_forward.cc): a dispatch to one function per op.
  void BuildForward(Plan& plan, int i);
  void ForwardInput(Plan& plan, int i);
  void ForwardConv(Plan& plan, int i);
  void ForwardLinear(Plan& plan, int i);
  void ForwardRelu(Plan& plan, int i);
  void ForwardPool(Plan& plan, int i);  // max and global average
  void ForwardBatchNorm(Plan& plan, int i);
  void ForwardDropout(Plan& plan, int i);
  void ForwardFlatten(Plan& plan, int i);
  void ForwardAdd(Plan& plan, int i);
  // Node i's backward steps (cpu_backward.cc), in reverse node order; `written[k]`: node k's
  // gradient has a writer already, so later ones accumulate (DiffTarget).
  void BuildBackward(Plan& plan, int i, std::vector<bool>& written);
  // Before a node's forward in training plans: waits for its parameters (params_needed_).
  void AddParamsNeededStep(Plan& plan, const ParamGroup& group);
  // After a node's backward: reports its parameters as final (gradient_ready_).
  void AddGradientReadyStep(Plan& plan, const ParamGroup& group);
  void BackwardConv(Plan& plan, int i, std::vector<bool>& written);
  void BackwardLinear(Plan& plan, int i, std::vector<bool>& written);
  void BackwardRelu(Plan& plan, int i, std::vector<bool>& written);
  void BackwardPool(Plan& plan, int i, std::vector<bool>& written);
  void BackwardBatchNorm(Plan& plan, int i, std::vector<bool>& written);
  void BackwardDropout(Plan& plan, int i, std::vector<bool>& written);
  void BackwardFlatten(Plan& plan, int i, std::vector<bool>& written);
  void BackwardAdd(Plan& plan, int i, std::vector<bool>& written);

  const CpuOptions options_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::vector<int64_t> param_offsets_;
  std::vector<std::vector<float>> running_mean_, running_var_;  // per batch-norm node
  std::map<std::pair<int, bool>, std::unique_ptr<Plan>> plans_;
  Plan* last_plan_ = nullptr;
};

}  // namespace r2sp::models::cpu_internal

#endif  // R2SP_MODELS_CPU_CPU_NETWORK_INTERNAL_H_
