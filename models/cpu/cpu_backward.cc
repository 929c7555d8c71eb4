// The CPU backend (models/cpu/cpu_network.cc): each node's backward primitives, one function
// per op, with gradient accumulation where a node has several consumers (DiffTarget);
// BuildBackward only dispatches.
#include "models/cpu/cpu_network_internal.h"

namespace r2sp::models::cpu_internal {
namespace {

Dims BatchDims(int64_t n, const Shape& s) { return {n, s.c, s.h, s.w}; }

void Append(std::vector<std::function<void()>>& steps, std::vector<std::function<void()>>& more) {
  for (auto& s : more) steps.push_back(std::move(s));
}

}  // namespace

void CpuNetwork::BuildBackward(Plan& plan, int i, std::vector<bool>& written) {
  switch (graph_.nodes[i].op) {
    case Op::kConv:
      return BackwardConv(plan, i, written);
    case Op::kLinear:
      return BackwardLinear(plan, i, written);
    case Op::kRelu:
      return BackwardRelu(plan, i, written);
    case Op::kMaxPool:
    case Op::kGlobalAvgPool:
      return BackwardPool(plan, i, written);
    case Op::kBatchNorm:
      return BackwardBatchNorm(plan, i, written);
    case Op::kDropout:
      return BackwardDropout(plan, i, written);
    case Op::kFlatten:
      return BackwardFlatten(plan, i, written);
    case Op::kAdd:
      return BackwardAdd(plan, i, written);
    case Op::kInput:
      return;
  }
}

void CpuNetwork::BackwardConv(Plan& plan, int i, std::vector<bool>& written) {
  const Node& node = graph_.nodes[i];
  NodePlan& np = plan.nodes[i];
  auto& bwd = plan.backward;
  const int in_index = node.inputs[0];
  const Shape& in_shape = graph_.nodes[in_index].out;
  const Dims in_dims = BatchDims(plan.batch, in_shape);
  const Dims out_dims = BatchDims(plan.batch, node.out);
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
  if (in_index == 0) return;  // the input image needs no gradient
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
  Append(bwd, post);
}

void CpuNetwork::BackwardLinear(Plan& plan, int i, std::vector<bool>& written) {
  const Node& node = graph_.nodes[i];
  NodePlan& np = plan.nodes[i];
  auto& bwd = plan.backward;
  const int64_t n = plan.batch;
  const auto& fwd_pd = np.ip_pd;
  // Through a Flatten the gradient goes to the flattened node (see ForwardLinear), and the
  // Flatten itself has none to pass on.
  int in_index = node.inputs[0];
  if (graph_.nodes[in_index].op == Op::kFlatten) in_index = graph_.nodes[in_index].inputs[0];
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
  if (in_index == 0) return;  // the input image needs no gradient
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
    Exec(plan, bwd, dnnl::reorder(as4d, target), {{DNNL_ARG_FROM, as4d}, {DNNL_ARG_TO, target}});
  } else {
    memory target = DiffTarget(plan, written, in_index, dpd.diff_src_desc(), &post);
    Exec(plan, bwd, dnnl::inner_product_backward_data(dpd),
         {{DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_WEIGHTS, np.bwd_w}, {DNNL_ARG_DIFF_SRC, target}});
  }
  Append(bwd, post);
}

void CpuNetwork::BackwardRelu(Plan& plan, int i, std::vector<bool>& written) {
  NodePlan& np = plan.nodes[i];
  dnnl::eltwise_backward::primitive_desc pd(
      dnnl::eltwise_backward::desc(dnnl::algorithm::eltwise_relu, np.diff.get_desc(),
                                   np.src.get_desc(), 0.0f),
      engine_, np.relu_pd);
  memory dd = Converted(plan, plan.backward, np.diff, pd.diff_dst_desc());
  std::vector<std::function<void()>> post;
  memory target =
      DiffTarget(plan, written, graph_.nodes[i].inputs[0], pd.diff_src_desc(), &post);
  Exec(plan, plan.backward, dnnl::eltwise_backward(pd),
       {{DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_SRC, np.src}, {DNNL_ARG_DIFF_SRC, target}});
  Append(plan.backward, post);
}

void CpuNetwork::BackwardPool(Plan& plan, int i, std::vector<bool>& written) {
  const Node& node = graph_.nodes[i];
  NodePlan& np = plan.nodes[i];
  const int in_index = node.inputs[0];
  const bool max = node.op == Op::kMaxPool;
  const Shape& in_shape = graph_.nodes[in_index].out;
  const int kh = max ? node.kernel : in_shape.h, kw = max ? node.kernel : in_shape.w;
  const int stride = max ? node.stride : 1;
  dnnl::pooling_backward::primitive_desc pd(
      dnnl::pooling_backward::desc(
          max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding,
          Desc(BatchDims(plan.batch, in_shape), Tag::any), np.diff.get_desc(), {stride, stride},
          {kh, kw}, {0, 0}, {0, 0}),
      engine_, np.pool_pd);
  memory dd = Converted(plan, plan.backward, np.diff, pd.diff_dst_desc());
  std::vector<std::function<void()>> post;
  memory target = DiffTarget(plan, written, in_index, pd.diff_src_desc(), &post);
  Args args = {{DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_DIFF_SRC, target}};
  if (max) args[DNNL_ARG_WORKSPACE] = np.workspace;
  Exec(plan, plan.backward, dnnl::pooling_backward(pd), std::move(args));
  Append(plan.backward, post);
}

void CpuNetwork::BackwardBatchNorm(Plan& plan, int i, std::vector<bool>& written) {
  const Node& node = graph_.nodes[i];
  NodePlan& np = plan.nodes[i];
  const int in_index = node.inputs[0];
  const int c = node.out.c;
  const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  dnnl::batch_normalization_backward::primitive_desc pd(
      dnnl::batch_normalization_backward::desc(dnnl::prop_kind::backward, np.diff.get_desc(),
                                               np.src.get_desc(), kBnEpsilon, flags),
      engine_, np.bn_pd);
  memory dd = Converted(plan, plan.backward, np.diff, pd.diff_dst_desc());
  np.user_dw = ParamMemory(plan, node.first_param, {c}, Tag::x, true);
  np.user_db = ParamMemory(plan, node.first_param + 1, {c}, Tag::x, true);
  std::vector<std::function<void()>> post;
  // Batch norm's input always needs its gradient here (it follows a convolution), but the
  // image itself never does: write into a scratch then.
  memory target = in_index > 0 ? DiffTarget(plan, written, in_index, pd.diff_src_desc(), &post)
                               : memory(pd.diff_src_desc(), engine_);
  Exec(plan, plan.backward, dnnl::batch_normalization_backward(pd),
       {{DNNL_ARG_SRC, np.src}, {DNNL_ARG_MEAN, np.mean}, {DNNL_ARG_VARIANCE, np.variance},
        {DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_SCALE, np.user_w}, {DNNL_ARG_SHIFT, np.user_b},
        {DNNL_ARG_DIFF_SRC, target},
        {DNNL_ARG_DIFF_SCALE, np.user_dw}, {DNNL_ARG_DIFF_SHIFT, np.user_db}});
  Append(plan.backward, post);
}

void CpuNetwork::BackwardDropout(Plan& plan, int i, std::vector<bool>& written) {
  NodePlan& np = plan.nodes[i];
  const int in_index = graph_.nodes[i].inputs[0];
  if (in_index == 0) return;
  std::vector<std::function<void()>> post;
  memory target = DiffTarget(plan, written, in_index, np.diff.get_desc(), &post);
  if (np.out == plan.nodes[in_index].out) {  // identity (p == 0)
    Exec(plan, plan.backward, dnnl::reorder(np.diff, target),
         {{DNNL_ARG_FROM, np.diff}, {DNNL_ARG_TO, target}});
  } else {
    const int64_t count = np.diff.get_desc().get_size() / sizeof(float);
    plan.backward.push_back([count, dy = np.diff, mask = np.workspace, dx = target] {
      const float* g = static_cast<const float*>(dy.get_data_handle());
      const float* k = static_cast<const float*>(mask.get_data_handle());
      float* out = static_cast<float*>(dx.get_data_handle());
      for (int64_t j = 0; j < count; ++j) out[j] = g[j] * k[j];
    });
  }
  Append(plan.backward, post);
}

void CpuNetwork::BackwardFlatten(Plan& plan, int i, std::vector<bool>& written) {
  NodePlan& np = plan.nodes[i];
  const int in_index = graph_.nodes[i].inputs[0];
  // Nothing wrote this node's gradient when linear layers read through it.
  if (in_index == 0 || !written[i]) return;
  std::vector<std::function<void()>> post;
  const memory::desc in_md = plan.nodes[in_index].out.get_desc();
  memory as_in(Desc(in_md.dims(), in_md.dims().size() == 2 ? Tag::nc : Tag::nchw), engine_,
               np.diff.get_data_handle());
  memory target = DiffTarget(plan, written, in_index, as_in.get_desc(), &post);
  Exec(plan, plan.backward, dnnl::reorder(as_in, target),
       {{DNNL_ARG_FROM, as_in}, {DNNL_ARG_TO, target}});
  Append(plan.backward, post);
}

void CpuNetwork::BackwardAdd(Plan& plan, int i, std::vector<bool>& written) {
  NodePlan& np = plan.nodes[i];
  for (int in : graph_.nodes[i].inputs) {
    if (in == 0) continue;
    std::vector<std::function<void()>> post;
    memory target = DiffTarget(plan, written, in, np.diff.get_desc(), &post);
    Exec(plan, plan.backward, dnnl::reorder(np.diff, target),
         {{DNNL_ARG_FROM, np.diff}, {DNNL_ARG_TO, target}});
    Append(plan.backward, post);
  }
}

}  // namespace r2sp::models::cpu_internal
