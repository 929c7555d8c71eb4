// The CPU backend: executes a Graph with oneDNN primitives. For each (batch size, mode) an
// execution plan is built once — primitives, memories, reorders, the backward pass with
// gradient accumulation where a node has several consumers — and reused every step.
// Activations stay in the layouts oneDNN prefers (blocked); parameters and gradients are
// read from and written to the flat plain-layout arrays, with reorders only where a
// primitive wants another layout.
#include <omp.h>

#include <functional>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "models/loss.h"
#include "models/network.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace r2sp::models {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Dt = memory::data_type;
using Dims = memory::dims;
using Args = std::unordered_map<int, memory>;

constexpr float kBnEpsilon = 1e-5f;
constexpr float kBnMomentum = 0.1f;  // PyTorch's running-statistics momentum

memory::desc Desc(const Dims& dims, Tag tag) { return memory::desc(dims, Dt::f32, tag); }

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
    absl::StatusOr<LossResult> loss = SoftmaxCrossEntropy(
        static_cast<const float*>(plan.nodes.back().out.get_data_handle()), labels, batch,
        last.out.c, static_cast<float*>(plan.nodes.back().diff.get_data_handle()));
    if (!loss.ok()) return loss.status();
    for (auto& step : plan.backward) step();
    stream_.wait();
    ++step_;
    return static_cast<float>(loss->loss_sum / batch);
  }

  absl::StatusOr<EvalResult> Evaluate(const float* params, const float* images,
                                      const int32_t* labels, int batch) override {
    if (batch < 1) return absl::InvalidArgumentError("batch must be >= 1");
    Plan& plan = PlanFor(batch, /*training=*/false);
    Bind(plan, params, images, nullptr);
    for (auto& step : plan.forward) step();
    stream_.wait();
    absl::StatusOr<LossResult> loss = SoftmaxCrossEntropy(
        static_cast<const float*>(plan.nodes.back().out.get_data_handle()), labels, batch,
        graph_.nodes.back().out.c, nullptr);
    if (!loss.ok()) return loss.status();
    return EvalResult{loss->correct, loss->loss_sum};
  }

  const float* logits() const override {
    return last_plan_ == nullptr
               ? nullptr
               : static_cast<const float*>(last_plan_->nodes.back().out.get_data_handle());
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
  void BuildForward(Plan& plan, int i);
  void BuildBackward(Plan& plan, int i, std::vector<bool>& written);

  const CpuOptions options_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::vector<int64_t> param_offsets_;
  std::vector<std::vector<float>> running_mean_, running_var_;  // per batch-norm node
  std::map<std::pair<int, bool>, std::unique_ptr<Plan>> plans_;
  Plan* last_plan_ = nullptr;
};

std::unique_ptr<Plan> CpuNetwork::BuildPlan(int batch, bool training) {
  auto plan = std::make_unique<Plan>();
  plan->batch = batch;
  plan->training = training;
  plan->nodes.resize(graph_.nodes.size());
  for (size_t i = 0; i < graph_.nodes.size(); ++i) BuildForward(*plan, static_cast<int>(i));
  if (training) {
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      plan->nodes[i].diff = memory(plan->nodes[i].out.get_desc(), engine_);
    }
    std::vector<bool> written(graph_.nodes.size(), false);
    written.back() = true;  // the loss writes the logits' gradient
    for (int i = static_cast<int>(graph_.nodes.size()) - 1; i > 0; --i) {
      BuildBackward(*plan, i, written);
    }
  }
  VLOG(1) << "built " << (training ? "training" : "inference") << " plan for batch " << batch;
  return plan;
}

void CpuNetwork::BuildForward(Plan& plan, int i) {
  const Node& node = graph_.nodes[i];
  NodePlan& np = plan.nodes[i];
  const int64_t n = plan.batch;
  const Dims out_dims = {n, node.out.c, node.out.h, node.out.w};
  const auto prop = plan.training ? dnnl::prop_kind::forward_training
                                  : dnnl::prop_kind::forward_inference;
  auto& fwd = plan.forward;
  if (node.op == Op::kInput) {
    plan.input = memory(Desc(out_dims, Tag::nchw), engine_, DNNL_MEMORY_NONE);
    np.out = plan.input;
    return;
  }
  NodePlan& in = plan.nodes[node.inputs[0]];
  const Shape& in_shape = graph_.nodes[node.inputs[0]].out;
  const Dims in_dims = {n, in_shape.c, in_shape.h, in_shape.w};
  switch (node.op) {
    case Op::kConv: {
      const Dims w_dims = {node.out.c, in_shape.c, node.kernel, node.kernel};
      const Dims strides = {node.stride, node.stride}, pad = {node.pad, node.pad};
      const memory::desc b_md = node.bias ? Desc({node.out.c}, Tag::x) : memory::desc();
      dnnl::convolution_forward::primitive_desc pd(
          dnnl::convolution_forward::desc(prop, dnnl::algorithm::convolution_direct,
                                          Desc(in_dims, Tag::any), Desc(w_dims, Tag::any), b_md,
                                          Desc(out_dims, Tag::any), strides, pad, pad),
          engine_);
      np.conv_pd = pd;
      np.user_w = ParamMemory(plan, node.first_param, w_dims, Tag::oihw, false);
      np.prim_w = Converted(plan, fwd, np.user_w, pd.weights_desc());
      np.src = Converted(plan, fwd, in.out, pd.src_desc());
      np.out = memory(pd.dst_desc(), engine_);
      Args args = {{DNNL_ARG_SRC, np.src}, {DNNL_ARG_WEIGHTS, np.prim_w}, {DNNL_ARG_DST, np.out}};
      if (node.bias) {
        np.user_b = ParamMemory(plan, node.first_param + 1, {node.out.c}, Tag::x, false);
        args[DNNL_ARG_BIAS] = np.user_b;
      }
      Exec(plan, fwd, dnnl::convolution_forward(pd), std::move(args));
      return;
    }
    case Op::kLinear: {
      // Through a Flatten, read the flattened node's 4-D output directly (no copy): oneDNN's
      // inner product flattens in C,H,W order itself.
      const int src_node = graph_.nodes[node.inputs[0]].op == Op::kFlatten
                               ? graph_.nodes[node.inputs[0]].inputs[0]
                               : node.inputs[0];
      NodePlan& in = plan.nodes[src_node];
      const Shape& in_shape = graph_.nodes[src_node].out;
      const Dims in_dims = {n, in_shape.c, in_shape.h, in_shape.w};
      const bool flat = in_shape.h == 1 && in_shape.w == 1 && graph_.nodes[src_node].op != Op::kInput;
      const Dims src_dims = flat ? Dims{n, in_shape.c} : in_dims;
      const Dims w_dims = flat ? Dims{node.out.c, in_shape.c}
                               : Dims{node.out.c, in_shape.c, in_shape.h, in_shape.w};
      const Tag w_tag = flat ? Tag::oi : Tag::oihw;
      // A 1x1 spatial input (global pooling) is viewed as 2-D; plain layouts only then.
      memory src = in.out;
      if (flat && in.out.get_desc().dims().size() == 4) {
        memory plain4 = Converted(plan, fwd, in.out, Desc(in_dims, Tag::nchw));
        // A view of the same bytes; plain4 owns them (never the rebound input image).
        src = memory(Desc(src_dims, Tag::nc), engine_, plain4.get_data_handle());
      }
      dnnl::inner_product_forward::primitive_desc pd(
          dnnl::inner_product_forward::desc(prop, src.get_desc(), Desc(w_dims, Tag::any),
                                            Desc({node.out.c}, Tag::x),
                                            Desc({n, node.out.c}, Tag::nc)),
          engine_);
      np.ip_pd = pd;
      np.user_w = ParamMemory(plan, node.first_param, w_dims, w_tag, false);
      np.user_b = ParamMemory(plan, node.first_param + 1, {node.out.c}, Tag::x, false);
      np.prim_w = Converted(plan, fwd, np.user_w, pd.weights_desc());
      np.src = Converted(plan, fwd, src, pd.src_desc());
      np.out = memory(pd.dst_desc(), engine_);
      Exec(plan, fwd, dnnl::inner_product_forward(pd),
           {{DNNL_ARG_SRC, np.src}, {DNNL_ARG_WEIGHTS, np.prim_w},
            {DNNL_ARG_BIAS, np.user_b}, {DNNL_ARG_DST, np.out}});
      return;
    }
    case Op::kRelu: {
      dnnl::eltwise_forward::primitive_desc pd(
          dnnl::eltwise_forward::desc(prop, dnnl::algorithm::eltwise_relu, in.out.get_desc(),
                                      0.0f),
          engine_);
      np.relu_pd = pd;
      np.src = in.out;
      np.out = memory(pd.dst_desc(), engine_);
      Exec(plan, fwd, dnnl::eltwise_forward(pd), {{DNNL_ARG_SRC, in.out}, {DNNL_ARG_DST, np.out}});
      return;
    }
    case Op::kMaxPool:
    case Op::kGlobalAvgPool: {
      const bool max = node.op == Op::kMaxPool;
      const int kh = max ? node.kernel : in_shape.h, kw = max ? node.kernel : in_shape.w;
      const int stride = max ? node.stride : 1;
      dnnl::pooling_forward::primitive_desc pd(
          dnnl::pooling_forward::desc(
              prop, max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding,
              in.out.get_desc(), Desc(out_dims, Tag::any), {stride, stride}, {kh, kw}, {0, 0},
              {0, 0}),
          engine_);
      np.pool_pd = pd;
      np.src = in.out;
      np.out = memory(pd.dst_desc(), engine_);
      Args args = {{DNNL_ARG_SRC, in.out}, {DNNL_ARG_DST, np.out}};
      if (max && plan.training) {
        np.workspace = memory(pd.workspace_desc(), engine_);
        args[DNNL_ARG_WORKSPACE] = np.workspace;
      }
      Exec(plan, fwd, dnnl::pooling_forward(pd), std::move(args));
      return;
    }
    case Op::kBatchNorm: {
      const int c = node.out.c;
      auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
      if (!plan.training) flags = flags | dnnl::normalization_flags::use_global_stats;
      dnnl::batch_normalization_forward::primitive_desc pd(
          dnnl::batch_normalization_forward::desc(prop, in.out.get_desc(), kBnEpsilon, flags),
          engine_);
      np.bn_pd = pd;
      np.src = in.out;
      np.out = memory(pd.dst_desc(), engine_);
      np.user_w = ParamMemory(plan, node.first_param, {c}, Tag::x, false);
      np.user_b = ParamMemory(plan, node.first_param + 1, {c}, Tag::x, false);
      if (plan.training) {
        np.mean = memory(pd.mean_desc(), engine_);
        np.variance = memory(pd.variance_desc(), engine_);
      } else {
        np.mean = memory(pd.mean_desc(), engine_, running_mean_[i].data());
        np.variance = memory(pd.variance_desc(), engine_, running_var_[i].data());
      }
      Exec(plan, fwd, dnnl::batch_normalization_forward(pd),
           {{DNNL_ARG_SRC, in.out}, {DNNL_ARG_DST, np.out}, {DNNL_ARG_SCALE, np.user_w},
            {DNNL_ARG_SHIFT, np.user_b}, {DNNL_ARG_MEAN, np.mean},
            {DNNL_ARG_VARIANCE, np.variance}});
      if (plan.training) {
        // PyTorch's running statistics: unbiased variance, momentum 0.1.
        const double count = static_cast<double>(n) * node.out.h * node.out.w;
        const float unbias = count > 1 ? static_cast<float>(count / (count - 1)) : 1.0f;
        fwd.push_back([this, i, c, unbias, mean = np.mean, var = np.variance] {
          const float* m = static_cast<const float*>(mean.get_data_handle());
          const float* v = static_cast<const float*>(var.get_data_handle());
          for (int k = 0; k < c; ++k) {
            running_mean_[i][k] = (1 - kBnMomentum) * running_mean_[i][k] + kBnMomentum * m[k];
            running_var_[i][k] =
                (1 - kBnMomentum) * running_var_[i][k] + kBnMomentum * v[k] * unbias;
          }
        });
      }
      return;
    }
    case Op::kDropout: {
      if (!plan.training || node.dropout == 0.0f) {
        np.src = np.out = in.out;  // identity
        return;
      }
      // Plain layout, so that mask element j is logical (NCHW) element j for every backend.
      const Dims dims = in.out.get_desc().dims();
      const memory::desc plain = Desc(dims, dims.size() == 2 ? Tag::nc : Tag::nchw);
      np.src = Converted(plan, fwd, in.out, plain);
      np.out = memory(plain, engine_);
      np.workspace = memory(plain, engine_);  // the scaled mask
      const int64_t count = plain.get_size() / sizeof(float);
      const float p = node.dropout, scale = 1.0f / (1.0f - node.dropout);
      fwd.push_back([this, i, count, p, scale, src = np.src, dst = np.out, mask = np.workspace] {
        const float* x = static_cast<const float*>(src.get_data_handle());
        float* y = static_cast<float*>(dst.get_data_handle());
        float* k = static_cast<float*>(mask.get_data_handle());
        for (int64_t j = 0; j < count; ++j) {
          k[j] = DropoutKeep(options_.seed, step_, i, j, p) ? scale : 0.0f;
          y[j] = x[j] * k[j];
        }
      });
      return;
    }
    case Op::kFlatten: {
      // A plain (n, c*h*w) view of the input: free when the input is already plain. Linear
      // layers read through a Flatten (see kLinear), so one that only feeds them does nothing.
      bool only_linear = true;
      for (const Node& other : graph_.nodes) {
        for (int src : other.inputs) only_linear &= src != i || other.op == Op::kLinear;
      }
      if (only_linear) {
        np.src = np.out = in.out;
        return;
      }
      const Dims dims = in.out.get_desc().dims();
      memory plain = Converted(plan, fwd, in.out, Desc(dims, dims.size() == 2 ? Tag::nc : Tag::nchw));
      np.src = plain;
      np.out = memory(Desc({n, node.out.c}, Tag::nc), engine_, plain.get_data_handle());
      if (node.inputs[0] == 0) {  // the image's handle changes every step
        fwd.push_back([out = np.out, src = plain]() mutable {
          out.set_data_handle(src.get_data_handle());
        });
      }
      return;
    }
    case Op::kAdd: {
      NodePlan& other = plan.nodes[node.inputs[1]];
      const memory::desc md = in.out.get_desc();
      memory b = Converted(plan, fwd, other.out, md);
      dnnl::binary::primitive_desc pd(
          dnnl::binary::desc(dnnl::algorithm::binary_add, md, md, md), engine_);
      np.out = memory(md, engine_);
      Exec(plan, fwd, dnnl::binary(pd),
           {{DNNL_ARG_SRC_0, in.out}, {DNNL_ARG_SRC_1, b}, {DNNL_ARG_DST, np.out}});
      return;
    }
    case Op::kInput:
      return;
  }
}

void CpuNetwork::BuildBackward(Plan& plan, int i, std::vector<bool>& written) {
  const Node& node = graph_.nodes[i];
  NodePlan& np = plan.nodes[i];
  auto& bwd = plan.backward;
  int in_index = node.inputs.empty() ? -1 : node.inputs[0];
  // The input image needs no gradient.
  bool need_src_diff = in_index > 0;
  const int64_t n = plan.batch;
  const Dims out_dims = {n, node.out.c, node.out.h, node.out.w};
  switch (node.op) {
    case Op::kConv: {
      const Shape& in_shape = graph_.nodes[in_index].out;
      const Dims in_dims = {n, in_shape.c, in_shape.h, in_shape.w};
      const Dims w_dims = {node.out.c, in_shape.c, node.kernel, node.kernel};
      const Dims strides = {node.stride, node.stride}, pad = {node.pad, node.pad};
      const auto& fwd_pd = np.conv_pd;
      const memory::desc b_md = node.bias ? Desc({node.out.c}, Tag::x) : memory::desc();
      dnnl::convolution_backward_weights::primitive_desc wpd(
          dnnl::convolution_backward_weights::desc(
              dnnl::algorithm::convolution_direct, Desc(in_dims, Tag::any), Desc(w_dims, Tag::any),
              b_md, Desc(out_dims, Tag::any), strides, pad, pad),
          engine_, fwd_pd);
      memory diff_dst = Converted(plan, bwd, np.diff, wpd.diff_dst_desc());
      memory src = Converted(plan, bwd, np.src, wpd.src_desc());
      np.user_dw = ParamMemory(plan, node.first_param, w_dims, Tag::oihw, true);
      const bool dw_plain = wpd.diff_weights_desc() == np.user_dw.get_desc();
      np.prim_dw = dw_plain ? np.user_dw : memory(wpd.diff_weights_desc(), engine_);
      Args args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, diff_dst},
                   {DNNL_ARG_DIFF_WEIGHTS, np.prim_dw}};
      if (node.bias) {
        np.user_db = ParamMemory(plan, node.first_param + 1, {node.out.c}, Tag::x, true);
        args[DNNL_ARG_DIFF_BIAS] = np.user_db;
      }
      Exec(plan, bwd, dnnl::convolution_backward_weights(wpd), std::move(args));
      if (!dw_plain) {
        Exec(plan, bwd, dnnl::reorder(np.prim_dw, np.user_dw),
             {{DNNL_ARG_FROM, np.prim_dw}, {DNNL_ARG_TO, np.user_dw}});
      }
      if (need_src_diff) {
        dnnl::convolution_backward_data::primitive_desc dpd(
            dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct,
                                                  Desc(in_dims, Tag::any), Desc(w_dims, Tag::any),
                                                  Desc(out_dims, Tag::any), strides, pad, pad),
            engine_, fwd_pd);
        np.bwd_w = np.prim_w.get_desc() == dpd.weights_desc()
                       ? np.prim_w
                       : Converted(plan, bwd, np.user_w, dpd.weights_desc());
        memory dd = Converted(plan, bwd, np.diff, dpd.diff_dst_desc());
        std::vector<std::function<void()>> post;
        memory target = DiffTarget(plan, written, in_index, dpd.diff_src_desc(), &post);
        Exec(plan, bwd, dnnl::convolution_backward_data(dpd),
             {{DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_WEIGHTS, np.bwd_w}, {DNNL_ARG_DIFF_SRC, target}});
        for (auto& s : post) bwd.push_back(std::move(s));
      }
      return;
    }
    case Op::kLinear: {
      const auto& fwd_pd = np.ip_pd;
      // Through a Flatten the gradient goes to the flattened node (see BuildForward), and the
      // Flatten itself has none to pass on.
      if (graph_.nodes[in_index].op == Op::kFlatten) {
        in_index = graph_.nodes[in_index].inputs[0];
        need_src_diff = in_index > 0;
      }
      const memory::desc src_md = fwd_pd.src_desc();
      const memory::desc user_w_md = np.user_w.get_desc();
      dnnl::inner_product_backward_weights::primitive_desc wpd(
          dnnl::inner_product_backward_weights::desc(
              src_md, memory::desc(user_w_md.dims(), Dt::f32, Tag::any),
              Desc({node.out.c}, Tag::x), Desc({n, node.out.c}, Tag::nc)),
          engine_, fwd_pd);
      memory diff_dst = Converted(plan, bwd, np.diff, wpd.diff_dst_desc());
      memory src = Converted(plan, bwd, np.src, wpd.src_desc());
      np.user_dw = memory(user_w_md, engine_, DNNL_MEMORY_NONE);
      plan.grad_bindings.emplace_back(np.user_dw, param_offsets_[node.first_param]);
      np.user_db = ParamMemory(plan, node.first_param + 1, {node.out.c}, Tag::x, true);
      const bool dw_plain = wpd.diff_weights_desc() == user_w_md;
      np.prim_dw = dw_plain ? np.user_dw : memory(wpd.diff_weights_desc(), engine_);
      Exec(plan, bwd, dnnl::inner_product_backward_weights(wpd),
           {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, diff_dst},
            {DNNL_ARG_DIFF_WEIGHTS, np.prim_dw}, {DNNL_ARG_DIFF_BIAS, np.user_db}});
      if (!dw_plain) {
        Exec(plan, bwd, dnnl::reorder(np.prim_dw, np.user_dw),
             {{DNNL_ARG_FROM, np.prim_dw}, {DNNL_ARG_TO, np.user_dw}});
      }
      if (need_src_diff) {
        const memory::desc in_md = plan.nodes[in_index].out.get_desc();
        const bool flat_view = src_md.dims() != in_md.dims();  // 2-D view of (n, c, 1, 1)
        dnnl::inner_product_backward_data::primitive_desc dpd(
            dnnl::inner_product_backward_data::desc(
                flat_view ? Desc(src_md.dims(), Tag::nc)
                          : memory::desc(src_md.dims(), Dt::f32, Tag::any),
                memory::desc(user_w_md.dims(), Dt::f32, Tag::any), Desc({n, node.out.c}, Tag::nc)),
            engine_, fwd_pd);
        np.bwd_w = np.prim_w.get_desc() == dpd.weights_desc()
                       ? np.prim_w
                       : Converted(plan, bwd, np.user_w, dpd.weights_desc());
        memory dd = Converted(plan, bwd, np.diff, dpd.diff_dst_desc());
        std::vector<std::function<void()>> post;
        if (flat_view) {
          memory flat(dpd.diff_src_desc(), engine_);
          memory as4d(Desc(in_md.dims(), Tag::nchw), engine_, flat.get_data_handle());
          memory target = DiffTarget(plan, written, in_index, as4d.get_desc(), &post);
          Exec(plan, bwd, dnnl::inner_product_backward_data(dpd),
               {{DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_WEIGHTS, np.bwd_w}, {DNNL_ARG_DIFF_SRC, flat}});
          Exec(plan, bwd, dnnl::reorder(as4d, target),
               {{DNNL_ARG_FROM, as4d}, {DNNL_ARG_TO, target}});
        } else {
          memory target = DiffTarget(plan, written, in_index, dpd.diff_src_desc(), &post);
          Exec(plan, bwd, dnnl::inner_product_backward_data(dpd),
               {{DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_WEIGHTS, np.bwd_w}, {DNNL_ARG_DIFF_SRC, target}});
        }
        for (auto& s : post) bwd.push_back(std::move(s));
      }
      return;
    }
    case Op::kRelu: {
      const auto& fwd_pd = np.relu_pd;
      dnnl::eltwise_backward::primitive_desc pd(
          dnnl::eltwise_backward::desc(dnnl::algorithm::eltwise_relu, np.diff.get_desc(),
                                       np.src.get_desc(), 0.0f),
          engine_, fwd_pd);
      memory dd = Converted(plan, bwd, np.diff, pd.diff_dst_desc());
      std::vector<std::function<void()>> post;
      memory target = DiffTarget(plan, written, in_index, pd.diff_src_desc(), &post);
      Exec(plan, bwd, dnnl::eltwise_backward(pd),
           {{DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_SRC, np.src}, {DNNL_ARG_DIFF_SRC, target}});
      for (auto& s : post) bwd.push_back(std::move(s));
      return;
    }
    case Op::kMaxPool:
    case Op::kGlobalAvgPool: {
      const bool max = node.op == Op::kMaxPool;
      const Shape& in_shape = graph_.nodes[in_index].out;
      const int kh = max ? node.kernel : in_shape.h, kw = max ? node.kernel : in_shape.w;
      const int stride = max ? node.stride : 1;
      const auto& fwd_pd = np.pool_pd;
      dnnl::pooling_backward::primitive_desc pd(
          dnnl::pooling_backward::desc(
              max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding,
              Desc({n, in_shape.c, in_shape.h, in_shape.w}, Tag::any), np.diff.get_desc(),
              {stride, stride}, {kh, kw}, {0, 0}, {0, 0}),
          engine_, fwd_pd);
      memory dd = Converted(plan, bwd, np.diff, pd.diff_dst_desc());
      std::vector<std::function<void()>> post;
      memory target = DiffTarget(plan, written, in_index, pd.diff_src_desc(), &post);
      Args args = {{DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_DIFF_SRC, target}};
      if (max) args[DNNL_ARG_WORKSPACE] = np.workspace;
      Exec(plan, bwd, dnnl::pooling_backward(pd), std::move(args));
      for (auto& s : post) bwd.push_back(std::move(s));
      return;
    }
    case Op::kBatchNorm: {
      const int c = node.out.c;
      const auto& fwd_pd = np.bn_pd;
      const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
      dnnl::batch_normalization_backward::primitive_desc pd(
          dnnl::batch_normalization_backward::desc(dnnl::prop_kind::backward, np.diff.get_desc(),
                                                   np.src.get_desc(), kBnEpsilon, flags),
          engine_, fwd_pd);
      memory dd = Converted(plan, bwd, np.diff, pd.diff_dst_desc());
      np.user_dw = ParamMemory(plan, node.first_param, {c}, Tag::x, true);
      np.user_db = ParamMemory(plan, node.first_param + 1, {c}, Tag::x, true);
      std::vector<std::function<void()>> post;
      // Batch norm's input always needs its gradient here (it follows a convolution), but the
      // image itself never does: write into a scratch then.
      memory target = need_src_diff
                          ? DiffTarget(plan, written, in_index, pd.diff_src_desc(), &post)
                          : memory(pd.diff_src_desc(), engine_);
      Exec(plan, bwd, dnnl::batch_normalization_backward(pd),
           {{DNNL_ARG_SRC, np.src}, {DNNL_ARG_MEAN, np.mean}, {DNNL_ARG_VARIANCE, np.variance},
            {DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_SCALE, np.user_w}, {DNNL_ARG_SHIFT, np.user_b},
            {DNNL_ARG_DIFF_SRC, target},
            {DNNL_ARG_DIFF_SCALE, np.user_dw}, {DNNL_ARG_DIFF_SHIFT, np.user_db}});
      for (auto& s : post) bwd.push_back(std::move(s));
      return;
    }
    case Op::kDropout: {
      if (!need_src_diff) return;
      std::vector<std::function<void()>> post;
      memory target = DiffTarget(plan, written, in_index, np.diff.get_desc(), &post);
      if (np.out == plan.nodes[in_index].out) {  // identity (p == 0)
        Exec(plan, bwd, dnnl::reorder(np.diff, target),
             {{DNNL_ARG_FROM, np.diff}, {DNNL_ARG_TO, target}});
      } else {
        const int64_t count = np.diff.get_desc().get_size() / sizeof(float);
        bwd.push_back([count, dy = np.diff, mask = np.workspace, dx = target] {
          const float* g = static_cast<const float*>(dy.get_data_handle());
          const float* k = static_cast<const float*>(mask.get_data_handle());
          float* out = static_cast<float*>(dx.get_data_handle());
          for (int64_t j = 0; j < count; ++j) out[j] = g[j] * k[j];
        });
      }
      for (auto& s : post) bwd.push_back(std::move(s));
      return;
    }
    case Op::kFlatten: {
      // Nothing wrote this node's gradient when linear layers read through it.
      if (!need_src_diff || !written[i]) return;
      std::vector<std::function<void()>> post;
      const memory::desc in_md = plan.nodes[in_index].out.get_desc();
      memory as_in(Desc(in_md.dims(), in_md.dims().size() == 2 ? Tag::nc : Tag::nchw), engine_,
                   np.diff.get_data_handle());
      memory target = DiffTarget(plan, written, in_index, as_in.get_desc(), &post);
      Exec(plan, bwd, dnnl::reorder(as_in, target), {{DNNL_ARG_FROM, as_in}, {DNNL_ARG_TO, target}});
      for (auto& s : post) bwd.push_back(std::move(s));
      return;
    }
    case Op::kAdd: {
      for (int in : node.inputs) {
        if (in == 0) continue;
        std::vector<std::function<void()>> post;
        memory target = DiffTarget(plan, written, in, np.diff.get_desc(), &post);
        Exec(plan, bwd, dnnl::reorder(np.diff, target), {{DNNL_ARG_FROM, np.diff}, {DNNL_ARG_TO, target}});
        for (auto& s : post) bwd.push_back(std::move(s));
      }
      return;
    }
    case Op::kInput:
      return;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Network>> CreateCpuNetwork(const Graph& graph,
                                                          const CpuOptions& options) {
  if (graph.nodes.size() < 2 || graph.nodes[0].op != Op::kInput) {
    return absl::InvalidArgumentError("a graph starts with its input and has a layer");
  }
  if (options.threads > 0) omp_set_num_threads(options.threads);
  try {
    return std::unique_ptr<Network>(new CpuNetwork(graph, options));
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat("oneDNN: ", e.what()));
  }
}

}  // namespace r2sp::models
