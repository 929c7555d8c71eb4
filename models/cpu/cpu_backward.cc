// BackwardPrimitives (cpu_backward.h): each node's backward steps, one function per op, with
// gradient accumulation where a node has several consumers (DiffTarget); Build only
// dispatches.
#include "models/cpu/cpu_backward.h"

namespace r2sp::models::cpu_internal {
namespace {

void Append(Steps& steps, Steps& more) {
  for (auto& s : more) steps.push_back(std::move(s));
}

}  // namespace

BackwardPrimitives::BackwardPrimitives(const Graph& graph, PlanSteps& steps)
    : graph_(graph), steps_(steps) {}

memory BackwardPrimitives::DiffTarget(Plan& plan, std::vector<bool>& written, int in,
                                      const memory::desc& desc, Steps* post) {
  NodePlan& target = plan.nodes[in];
  const memory::desc& want = target.diff.get_desc();
  if (!written[in]) {
    written[in] = true;
    if (desc == want) return target.diff;
    memory tmp(desc, steps_.engine());
    steps_.Exec(*post, dnnl::reorder(tmp, target.diff),
                {{DNNL_ARG_FROM, tmp}, {DNNL_ARG_TO, target.diff}});
    return tmp;
  }
  memory tmp(desc, steps_.engine());
  memory addend = steps_.Converted(*post, tmp, want);
  dnnl::binary::primitive_desc add_pd(
      dnnl::binary::desc(dnnl::algorithm::binary_add, want, want, want), steps_.engine());
  steps_.Exec(
      *post, dnnl::binary(add_pd),
      {{DNNL_ARG_SRC_0, target.diff}, {DNNL_ARG_SRC_1, addend}, {DNNL_ARG_DST, target.diff}});
  return tmp;
}

void BackwardPrimitives::Build(Plan& plan, int i, std::vector<bool>& written) {
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

void BackwardPrimitives::BackwardConv(Plan& plan, int i, std::vector<bool>& written) {
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
      dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct,
                                               Desc(in_dims, Tag::any), Desc(w_dims, Tag::any),
                                               b_md, Desc(out_dims, Tag::any), strides, pad, pad),
      steps_.engine(), fwd_pd);
  memory diff_dst = steps_.Converted(bwd, np.diff, wpd.diff_dst_desc());
  memory src = steps_.Converted(bwd, np.src, wpd.src_desc());
  np.user_dw = steps_.ParamMemory(plan, node.first_param, w_dims, Tag::oihw, true);
  const bool dw_plain = wpd.diff_weights_desc() == np.user_dw.get_desc();
  np.prim_dw = dw_plain ? np.user_dw : memory(wpd.diff_weights_desc(), steps_.engine());
  Args args = {
      {DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_WEIGHTS, np.prim_dw}};
  if (node.bias) {
    np.user_db = steps_.ParamMemory(plan, node.first_param + 1, {node.out.c}, Tag::x, true);
    args[DNNL_ARG_DIFF_BIAS] = np.user_db;
  }
  steps_.Exec(bwd, dnnl::convolution_backward_weights(wpd), std::move(args));
  if (!dw_plain) {
    steps_.Exec(bwd, dnnl::reorder(np.prim_dw, np.user_dw),
                {{DNNL_ARG_FROM, np.prim_dw}, {DNNL_ARG_TO, np.user_dw}});
  }
  if (in_index == 0) return;  // the input image needs no gradient
  dnnl::convolution_backward_data::primitive_desc dpd(
      dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct,
                                            Desc(in_dims, Tag::any), Desc(w_dims, Tag::any),
                                            Desc(out_dims, Tag::any), strides, pad, pad),
      steps_.engine(), fwd_pd);
  np.bwd_w = np.prim_w.get_desc() == dpd.weights_desc()
                 ? np.prim_w
                 : steps_.Converted(bwd, np.user_w, dpd.weights_desc());
  memory dd = steps_.Converted(bwd, np.diff, dpd.diff_dst_desc());
  Steps post;
  memory target = DiffTarget(plan, written, in_index, dpd.diff_src_desc(), &post);
  steps_.Exec(bwd, dnnl::convolution_backward_data(dpd),
              {{DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_WEIGHTS, np.bwd_w}, {DNNL_ARG_DIFF_SRC, target}});
  Append(bwd, post);
}

void BackwardPrimitives::BackwardLinear(Plan& plan, int i, std::vector<bool>& written) {
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
          src_md, memory::desc(user_w_md.dims(), Dt::f32, Tag::any), Desc({node.out.c}, Tag::x),
          Desc({n, node.out.c}, Tag::nc)),
      steps_.engine(), fwd_pd);
  memory diff_dst = steps_.Converted(bwd, np.diff, wpd.diff_dst_desc());
  memory src = steps_.Converted(bwd, np.src, wpd.src_desc());
  np.user_dw = memory(user_w_md, steps_.engine(), DNNL_MEMORY_NONE);
  plan.grad_bindings.emplace_back(np.user_dw, steps_.param_offset(node.first_param));
  np.user_db = steps_.ParamMemory(plan, node.first_param + 1, {node.out.c}, Tag::x, true);
  const bool dw_plain = wpd.diff_weights_desc() == user_w_md;
  np.prim_dw = dw_plain ? np.user_dw : memory(wpd.diff_weights_desc(), steps_.engine());
  steps_.Exec(bwd, dnnl::inner_product_backward_weights(wpd),
              {{DNNL_ARG_SRC, src},
               {DNNL_ARG_DIFF_DST, diff_dst},
               {DNNL_ARG_DIFF_WEIGHTS, np.prim_dw},
               {DNNL_ARG_DIFF_BIAS, np.user_db}});
  if (!dw_plain) {
    steps_.Exec(bwd, dnnl::reorder(np.prim_dw, np.user_dw),
                {{DNNL_ARG_FROM, np.prim_dw}, {DNNL_ARG_TO, np.user_dw}});
  }
  if (in_index == 0) return;  // the input image needs no gradient
  const memory::desc in_md = plan.nodes[in_index].out.get_desc();
  const bool flat_view = src_md.dims() != in_md.dims();  // 2-D view of (n, c, 1, 1)
  dnnl::inner_product_backward_data::primitive_desc dpd(
      dnnl::inner_product_backward_data::desc(
          flat_view ? Desc(src_md.dims(), Tag::nc) : memory::desc(src_md.dims(), Dt::f32, Tag::any),
          memory::desc(user_w_md.dims(), Dt::f32, Tag::any), Desc({n, node.out.c}, Tag::nc)),
      steps_.engine(), fwd_pd);
  np.bwd_w = np.prim_w.get_desc() == dpd.weights_desc()
                 ? np.prim_w
                 : steps_.Converted(bwd, np.user_w, dpd.weights_desc());
  memory dd = steps_.Converted(bwd, np.diff, dpd.diff_dst_desc());
  Steps post;
  if (flat_view) {
    memory flat(dpd.diff_src_desc(), steps_.engine());
    memory as4d(Desc(in_md.dims(), Tag::nchw), steps_.engine(), flat.get_data_handle());
    memory target = DiffTarget(plan, written, in_index, as4d.get_desc(), &post);
    steps_.Exec(bwd, dnnl::inner_product_backward_data(dpd),
                {{DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_WEIGHTS, np.bwd_w}, {DNNL_ARG_DIFF_SRC, flat}});
    steps_.Exec(bwd, dnnl::reorder(as4d, target), {{DNNL_ARG_FROM, as4d}, {DNNL_ARG_TO, target}});
  } else {
    memory target = DiffTarget(plan, written, in_index, dpd.diff_src_desc(), &post);
    steps_.Exec(
        bwd, dnnl::inner_product_backward_data(dpd),
        {{DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_WEIGHTS, np.bwd_w}, {DNNL_ARG_DIFF_SRC, target}});
  }
  Append(bwd, post);
}

void BackwardPrimitives::BackwardRelu(Plan& plan, int i, std::vector<bool>& written) {
  NodePlan& np = plan.nodes[i];
  dnnl::eltwise_backward::primitive_desc pd(
      dnnl::eltwise_backward::desc(dnnl::algorithm::eltwise_relu, np.diff.get_desc(),
                                   np.src.get_desc(), 0.0f),
      steps_.engine(), np.relu_pd);
  memory dd = steps_.Converted(plan.backward, np.diff, pd.diff_dst_desc());
  Steps post;
  memory target = DiffTarget(plan, written, graph_.nodes[i].inputs[0], pd.diff_src_desc(), &post);
  steps_.Exec(plan.backward, dnnl::eltwise_backward(pd),
              {{DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_SRC, np.src}, {DNNL_ARG_DIFF_SRC, target}});
  Append(plan.backward, post);
}

void BackwardPrimitives::BackwardPool(Plan& plan, int i, std::vector<bool>& written) {
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
      steps_.engine(), np.pool_pd);
  memory dd = steps_.Converted(plan.backward, np.diff, pd.diff_dst_desc());
  Steps post;
  memory target = DiffTarget(plan, written, in_index, pd.diff_src_desc(), &post);
  Args args = {{DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_DIFF_SRC, target}};
  if (max) args[DNNL_ARG_WORKSPACE] = np.workspace;
  steps_.Exec(plan.backward, dnnl::pooling_backward(pd), std::move(args));
  Append(plan.backward, post);
}

void BackwardPrimitives::BackwardBatchNorm(Plan& plan, int i, std::vector<bool>& written) {
  const Node& node = graph_.nodes[i];
  NodePlan& np = plan.nodes[i];
  const int in_index = node.inputs[0];
  const int c = node.out.c;
  const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  dnnl::batch_normalization_backward::primitive_desc pd(
      dnnl::batch_normalization_backward::desc(dnnl::prop_kind::backward, np.diff.get_desc(),
                                               np.src.get_desc(), kBnEpsilon, flags),
      steps_.engine(), np.bn_pd);
  memory dd = steps_.Converted(plan.backward, np.diff, pd.diff_dst_desc());
  np.user_dw = steps_.ParamMemory(plan, node.first_param, {c}, Tag::x, true);
  np.user_db = steps_.ParamMemory(plan, node.first_param + 1, {c}, Tag::x, true);
  Steps post;
  // Batch norm's input always needs its gradient here (it follows a convolution), but the
  // image itself never does: write into a scratch then.
  memory target = in_index > 0 ? DiffTarget(plan, written, in_index, pd.diff_src_desc(), &post)
                               : memory(pd.diff_src_desc(), steps_.engine());
  steps_.Exec(plan.backward, dnnl::batch_normalization_backward(pd),
              {{DNNL_ARG_SRC, np.src},
               {DNNL_ARG_MEAN, np.mean},
               {DNNL_ARG_VARIANCE, np.variance},
               {DNNL_ARG_DIFF_DST, dd},
               {DNNL_ARG_SCALE, np.user_w},
               {DNNL_ARG_SHIFT, np.user_b},
               {DNNL_ARG_DIFF_SRC, target},
               {DNNL_ARG_DIFF_SCALE, np.user_dw},
               {DNNL_ARG_DIFF_SHIFT, np.user_db}});
  Append(plan.backward, post);
}

void BackwardPrimitives::BackwardDropout(Plan& plan, int i, std::vector<bool>& written) {
  NodePlan& np = plan.nodes[i];
  const int in_index = graph_.nodes[i].inputs[0];
  if (in_index == 0) return;
  Steps post;
  memory target = DiffTarget(plan, written, in_index, np.diff.get_desc(), &post);
  if (np.out == plan.nodes[in_index].out) {  // identity (p == 0)
    steps_.Exec(plan.backward, dnnl::reorder(np.diff, target),
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

void BackwardPrimitives::BackwardFlatten(Plan& plan, int i, std::vector<bool>& written) {
  NodePlan& np = plan.nodes[i];
  const int in_index = graph_.nodes[i].inputs[0];
  // Nothing wrote this node's gradient when linear layers read through it.
  if (in_index == 0 || !written[i]) return;
  Steps post;
  const memory::desc in_md = plan.nodes[in_index].out.get_desc();
  memory as_in(Desc(in_md.dims(), in_md.dims().size() == 2 ? Tag::nc : Tag::nchw), steps_.engine(),
               np.diff.get_data_handle());
  memory target = DiffTarget(plan, written, in_index, as_in.get_desc(), &post);
  steps_.Exec(plan.backward, dnnl::reorder(as_in, target),
              {{DNNL_ARG_FROM, as_in}, {DNNL_ARG_TO, target}});
  Append(plan.backward, post);
}

void BackwardPrimitives::BackwardAdd(Plan& plan, int i, std::vector<bool>& written) {
  NodePlan& np = plan.nodes[i];
  for (int in : graph_.nodes[i].inputs) {
    if (in == 0) continue;
    Steps post;
    memory target = DiffTarget(plan, written, in, np.diff.get_desc(), &post);
    steps_.Exec(plan.backward, dnnl::reorder(np.diff, target),
                {{DNNL_ARG_FROM, np.diff}, {DNNL_ARG_TO, target}});
    Append(plan.backward, post);
  }
}

}  // namespace r2sp::models::cpu_internal
