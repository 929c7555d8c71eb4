// ForwardPrimitives (cpu_forward.h): each node's forward steps, one function per op; Build
// only dispatches.
#include "models/cpu/cpu_forward.h"

namespace r2sp::models::cpu_internal {
namespace {

dnnl::prop_kind ForwardProp(const Plan& plan) {
  return plan.training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
}

}  // namespace

ForwardPrimitives::ForwardPrimitives(const Graph& graph, PlanSteps& steps,
                                     RunningStatistics* running, uint64_t seed, const int64_t* step)
    : graph_(graph), steps_(steps), running_(*running), seed_(seed), step_(*step) {}

void ForwardPrimitives::Build(Plan& plan, int i) {
  switch (graph_.nodes[i].op) {
    case Op::kInput:
      return ForwardInput(plan, i);
    case Op::kConv:
      return ForwardConv(plan, i);
    case Op::kLinear:
      return ForwardLinear(plan, i);
    case Op::kRelu:
      return ForwardRelu(plan, i);
    case Op::kMaxPool:
    case Op::kGlobalAvgPool:
      return ForwardPool(plan, i);
    case Op::kBatchNorm:
      return ForwardBatchNorm(plan, i);
    case Op::kDropout:
      return ForwardDropout(plan, i);
    case Op::kFlatten:
      return ForwardFlatten(plan, i);
    case Op::kAdd:
      return ForwardAdd(plan, i);
  }
}

void ForwardPrimitives::ForwardInput(Plan& plan, int i) {
  plan.input = memory(Desc(BatchDims(plan.batch, graph_.nodes[i].out), Tag::nchw), steps_.engine(),
                      DNNL_MEMORY_NONE);
  plan.nodes[i].out = plan.input;
}

void ForwardPrimitives::ForwardConv(Plan& plan, int i) {
  const Node& node = graph_.nodes[i];
  NodePlan& np = plan.nodes[i];
  NodePlan& in = plan.nodes[node.inputs[0]];
  const Shape& in_shape = graph_.nodes[node.inputs[0]].out;
  const Dims w_dims = {node.out.c, in_shape.c, node.kernel, node.kernel};
  const Dims strides = {node.stride, node.stride}, pad = {node.pad, node.pad};
  const memory::desc b_md = node.bias ? Desc({node.out.c}, Tag::x) : memory::desc();
  dnnl::convolution_forward::primitive_desc pd(
      dnnl::convolution_forward::desc(
          ForwardProp(plan), dnnl::algorithm::convolution_direct,
          Desc(BatchDims(plan.batch, in_shape), Tag::any), Desc(w_dims, Tag::any), b_md,
          Desc(BatchDims(plan.batch, node.out), Tag::any), strides, pad, pad),
      steps_.engine());
  np.conv_pd = pd;
  np.user_w = steps_.ParamMemory(plan, node.first_param, w_dims, Tag::oihw, false);
  np.prim_w = steps_.Converted(plan.forward, np.user_w, pd.weights_desc());
  np.src = steps_.Converted(plan.forward, in.out, pd.src_desc());
  np.out = memory(pd.dst_desc(), steps_.engine());
  Args args = {{DNNL_ARG_SRC, np.src}, {DNNL_ARG_WEIGHTS, np.prim_w}, {DNNL_ARG_DST, np.out}};
  if (node.bias) {
    np.user_b = steps_.ParamMemory(plan, node.first_param + 1, {node.out.c}, Tag::x, false);
    args[DNNL_ARG_BIAS] = np.user_b;
  }
  steps_.Exec(plan.forward, dnnl::convolution_forward(pd), std::move(args));
}

void ForwardPrimitives::ForwardLinear(Plan& plan, int i) {
  const Node& node = graph_.nodes[i];
  NodePlan& np = plan.nodes[i];
  auto& fwd = plan.forward;
  const int64_t n = plan.batch;
  // Through a Flatten, read the flattened node's 4-D output directly (no copy): oneDNN's
  // inner product flattens in C,H,W order itself.
  const int src_node = graph_.nodes[node.inputs[0]].op == Op::kFlatten
                           ? graph_.nodes[node.inputs[0]].inputs[0]
                           : node.inputs[0];
  NodePlan& in = plan.nodes[src_node];
  const Shape& in_shape = graph_.nodes[src_node].out;
  const Dims in_dims = BatchDims(n, in_shape);
  const bool flat = in_shape.h == 1 && in_shape.w == 1 && graph_.nodes[src_node].op != Op::kInput;
  const Dims src_dims = flat ? Dims{n, in_shape.c} : in_dims;
  const Dims w_dims =
      flat ? Dims{node.out.c, in_shape.c} : Dims{node.out.c, in_shape.c, in_shape.h, in_shape.w};
  const Tag w_tag = flat ? Tag::oi : Tag::oihw;
  // A 1x1 spatial input (global pooling) is viewed as 2-D; plain layouts only then.
  memory src = in.out;
  if (flat && in.out.get_desc().dims().size() == 4) {
    memory plain4 = steps_.Converted(fwd, in.out, Desc(in_dims, Tag::nchw));
    // A view of the same bytes; plain4 owns them (never the rebound input image).
    src = memory(Desc(src_dims, Tag::nc), steps_.engine(), plain4.get_data_handle());
  }
  dnnl::inner_product_forward::primitive_desc pd(
      dnnl::inner_product_forward::desc(ForwardProp(plan), src.get_desc(), Desc(w_dims, Tag::any),
                                        Desc({node.out.c}, Tag::x), Desc({n, node.out.c}, Tag::nc)),
      steps_.engine());
  np.ip_pd = pd;
  np.user_w = steps_.ParamMemory(plan, node.first_param, w_dims, w_tag, false);
  np.user_b = steps_.ParamMemory(plan, node.first_param + 1, {node.out.c}, Tag::x, false);
  np.prim_w = steps_.Converted(fwd, np.user_w, pd.weights_desc());
  np.src = steps_.Converted(fwd, src, pd.src_desc());
  np.out = memory(pd.dst_desc(), steps_.engine());
  steps_.Exec(fwd, dnnl::inner_product_forward(pd),
              {{DNNL_ARG_SRC, np.src},
               {DNNL_ARG_WEIGHTS, np.prim_w},
               {DNNL_ARG_BIAS, np.user_b},
               {DNNL_ARG_DST, np.out}});
}

void ForwardPrimitives::ForwardRelu(Plan& plan, int i) {
  NodePlan& np = plan.nodes[i];
  NodePlan& in = plan.nodes[graph_.nodes[i].inputs[0]];
  dnnl::eltwise_forward::primitive_desc pd(
      dnnl::eltwise_forward::desc(ForwardProp(plan), dnnl::algorithm::eltwise_relu,
                                  in.out.get_desc(), 0.0f),
      steps_.engine());
  np.relu_pd = pd;
  np.src = in.out;
  np.out = memory(pd.dst_desc(), steps_.engine());
  steps_.Exec(plan.forward, dnnl::eltwise_forward(pd),
              {{DNNL_ARG_SRC, in.out}, {DNNL_ARG_DST, np.out}});
}

void ForwardPrimitives::ForwardPool(Plan& plan, int i) {
  const Node& node = graph_.nodes[i];
  NodePlan& np = plan.nodes[i];
  NodePlan& in = plan.nodes[node.inputs[0]];
  const Shape& in_shape = graph_.nodes[node.inputs[0]].out;
  const bool max = node.op == Op::kMaxPool;
  const int kh = max ? node.kernel : in_shape.h, kw = max ? node.kernel : in_shape.w;
  const int stride = max ? node.stride : 1;
  dnnl::pooling_forward::primitive_desc pd(
      dnnl::pooling_forward::desc(
          ForwardProp(plan),
          max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding,
          in.out.get_desc(), Desc(BatchDims(plan.batch, node.out), Tag::any), {stride, stride},
          {kh, kw}, {0, 0}, {0, 0}),
      steps_.engine());
  np.pool_pd = pd;
  np.src = in.out;
  np.out = memory(pd.dst_desc(), steps_.engine());
  Args args = {{DNNL_ARG_SRC, in.out}, {DNNL_ARG_DST, np.out}};
  if (max && plan.training) {
    np.workspace = memory(pd.workspace_desc(), steps_.engine());
    args[DNNL_ARG_WORKSPACE] = np.workspace;
  }
  steps_.Exec(plan.forward, dnnl::pooling_forward(pd), std::move(args));
}

void ForwardPrimitives::ForwardBatchNorm(Plan& plan, int i) {
  const Node& node = graph_.nodes[i];
  NodePlan& np = plan.nodes[i];
  NodePlan& in = plan.nodes[node.inputs[0]];
  auto& fwd = plan.forward;
  const int c = node.out.c;
  auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  if (!plan.training) flags = flags | dnnl::normalization_flags::use_global_stats;
  dnnl::batch_normalization_forward::primitive_desc pd(
      dnnl::batch_normalization_forward::desc(ForwardProp(plan), in.out.get_desc(), kBnEpsilon,
                                              flags),
      steps_.engine());
  np.bn_pd = pd;
  np.src = in.out;
  np.out = memory(pd.dst_desc(), steps_.engine());
  np.user_w = steps_.ParamMemory(plan, node.first_param, {c}, Tag::x, false);
  np.user_b = steps_.ParamMemory(plan, node.first_param + 1, {c}, Tag::x, false);
  if (plan.training) {
    np.mean = memory(pd.mean_desc(), steps_.engine());
    np.variance = memory(pd.variance_desc(), steps_.engine());
  } else {
    np.mean = memory(pd.mean_desc(), steps_.engine(), running_.mean[i].data());
    np.variance = memory(pd.variance_desc(), steps_.engine(), running_.var[i].data());
  }
  steps_.Exec(fwd, dnnl::batch_normalization_forward(pd),
              {{DNNL_ARG_SRC, in.out},
               {DNNL_ARG_DST, np.out},
               {DNNL_ARG_SCALE, np.user_w},
               {DNNL_ARG_SHIFT, np.user_b},
               {DNNL_ARG_MEAN, np.mean},
               {DNNL_ARG_VARIANCE, np.variance}});
  if (!plan.training) return;
  // PyTorch's running statistics: unbiased variance (kBatchNormMomentum in models/graph.h).
  const double count = static_cast<double>(plan.batch) * node.out.h * node.out.w;
  const float unbias = count > 1 ? static_cast<float>(count / (count - 1)) : 1.0f;
  // The running vectors never move (SetBatchNormStatistics copies into them).
  fwd.push_back([c, unbias, mean = np.mean, var = np.variance, run_mean = running_.mean[i].data(),
                 run_var = running_.var[i].data()] {
    const float* m = static_cast<const float*>(mean.get_data_handle());
    const float* v = static_cast<const float*>(var.get_data_handle());
    for (int k = 0; k < c; ++k) {
      run_mean[k] = (1 - kBnMomentum) * run_mean[k] + kBnMomentum * m[k];
      run_var[k] = (1 - kBnMomentum) * run_var[k] + kBnMomentum * v[k] * unbias;
    }
  });
}

void ForwardPrimitives::ForwardDropout(Plan& plan, int i) {
  const Node& node = graph_.nodes[i];
  NodePlan& np = plan.nodes[i];
  NodePlan& in = plan.nodes[node.inputs[0]];
  if (!plan.training || node.dropout == 0.0f) {
    np.src = np.out = in.out;  // identity
    return;
  }
  // Plain layout, so that mask element j is logical (NCHW) element j for every backend.
  const Dims dims = in.out.get_desc().dims();
  const memory::desc plain = Desc(dims, dims.size() == 2 ? Tag::nc : Tag::nchw);
  np.src = steps_.Converted(plan.forward, in.out, plain);
  np.out = memory(plain, steps_.engine());
  np.workspace = memory(plain, steps_.engine());  // the scaled mask
  const int64_t count = plain.get_size() / sizeof(float);
  const float p = node.dropout, scale = 1.0f / (1.0f - node.dropout);
  plan.forward.push_back(
      [this, i, count, p, scale, src = np.src, dst = np.out, mask = np.workspace] {
        const float* x = static_cast<const float*>(src.get_data_handle());
        float* y = static_cast<float*>(dst.get_data_handle());
        float* k = static_cast<float*>(mask.get_data_handle());
        for (int64_t j = 0; j < count; ++j) {
          k[j] = DropoutKeep(seed_, step_, i, j, p) ? scale : 0.0f;
          y[j] = x[j] * k[j];
        }
      });
}

void ForwardPrimitives::ForwardFlatten(Plan& plan, int i) {
  const Node& node = graph_.nodes[i];
  NodePlan& np = plan.nodes[i];
  NodePlan& in = plan.nodes[node.inputs[0]];
  // A plain (n, c*h*w) view of the input: free when the input is already plain. Linear
  // layers read through a Flatten (see ForwardLinear), so one that only feeds them does nothing.
  bool only_linear = true;
  for (const Node& other : graph_.nodes) {
    for (int src : other.inputs) only_linear &= src != i || other.op == Op::kLinear;
  }
  if (only_linear) {
    np.src = np.out = in.out;
    return;
  }
  const Dims dims = in.out.get_desc().dims();
  memory plain =
      steps_.Converted(plan.forward, in.out, Desc(dims, dims.size() == 2 ? Tag::nc : Tag::nchw));
  np.src = plain;
  np.out =
      memory(Desc({plan.batch, node.out.c}, Tag::nc), steps_.engine(), plain.get_data_handle());
  if (node.inputs[0] == 0) {  // the image's handle changes every step
    plan.forward.push_back(
        [out = np.out, src = plain]() mutable { out.set_data_handle(src.get_data_handle()); });
  }
}

void ForwardPrimitives::ForwardAdd(Plan& plan, int i) {
  const Node& node = graph_.nodes[i];
  NodePlan& np = plan.nodes[i];
  NodePlan& in = plan.nodes[node.inputs[0]];
  NodePlan& other = plan.nodes[node.inputs[1]];
  const memory::desc md = in.out.get_desc();
  memory b = steps_.Converted(plan.forward, other.out, md);
  dnnl::binary::primitive_desc pd(dnnl::binary::desc(dnnl::algorithm::binary_add, md, md, md),
                                  steps_.engine());
  np.out = memory(md, steps_.engine());
  steps_.Exec(plan.forward, dnnl::binary(pd),
              {{DNNL_ARG_SRC_0, in.out}, {DNNL_ARG_SRC_1, b}, {DNNL_ARG_DST, np.out}});
}

}  // namespace r2sp::models::cpu_internal
