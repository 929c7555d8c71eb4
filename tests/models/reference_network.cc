// See reference_network.h. Plain loops, NCHW, double precision; clarity over speed.
#include "tests/models/reference_network.h"

#include <algorithm>
#include <cmath>

namespace r2sp::models::testing {

double ReferenceLoss(const Graph& graph, const std::vector<double>& params,
                     const std::vector<double>& images, const std::vector<int32_t>& labels,
                     int batch, const ReferenceOptions& options, std::vector<double>* logits,
                     std::vector<std::vector<double>>* bn_mean,
                     std::vector<std::vector<double>>* bn_var) {
  std::vector<int64_t> offsets;
  int64_t offset = 0;
  for (const Param& p : graph.params) {
    offsets.push_back(offset);
    offset += p.size();
  }
  if (bn_mean) bn_mean->assign(graph.nodes.size(), {});
  if (bn_var) bn_var->assign(graph.nodes.size(), {});
  std::vector<std::vector<double>> act(graph.nodes.size());
  act[0] = images;
  const int n = batch;
  for (size_t i = 1; i < graph.nodes.size(); ++i) {
    const Node& node = graph.nodes[i];
    const Shape& is = graph.nodes[node.inputs[0]].out;
    const Shape& os = node.out;
    const std::vector<double>& x = act[node.inputs[0]];
    std::vector<double>& y = act[i];
    y.assign(static_cast<size_t>(n) * os.size(), 0.0);
    const double* w = node.first_param >= 0 ? params.data() + offsets[node.first_param] : nullptr;
    const double* b = node.first_param >= 0 && (node.bias || node.op == Op::kBatchNorm)
                          ? params.data() + offsets[node.first_param + 1]
                          : nullptr;
    auto X = [&](int s, int c, int h, int ww) {
      return x[((static_cast<size_t>(s) * is.c + c) * is.h + h) * is.w + ww];
    };
    auto Y = [&](int s, int c, int h, int ww) -> double& {
      return y[((static_cast<size_t>(s) * os.c + c) * os.h + h) * os.w + ww];
    };
    switch (node.op) {
      case Op::kConv:
        for (int s = 0; s < n; ++s)
          for (int o = 0; o < os.c; ++o)
            for (int oh = 0; oh < os.h; ++oh)
              for (int ow = 0; ow < os.w; ++ow) {
                double acc = b ? b[o] : 0.0;
                for (int c = 0; c < is.c; ++c)
                  for (int kh = 0; kh < node.kernel; ++kh)
                    for (int kw = 0; kw < node.kernel; ++kw) {
                      const int ih = oh * node.stride - node.pad + kh;
                      const int iw = ow * node.stride - node.pad + kw;
                      if (ih < 0 || iw < 0 || ih >= is.h || iw >= is.w) continue;
                      acc += w[((static_cast<size_t>(o) * is.c + c) * node.kernel + kh) *
                                   node.kernel + kw] * X(s, c, ih, iw);
                    }
                Y(s, o, oh, ow) = acc;
              }
        break;
      case Op::kLinear: {
        const int64_t in = is.size();
        for (int s = 0; s < n; ++s)
          for (int o = 0; o < os.c; ++o) {
            double acc = b[o];
            for (int64_t k = 0; k < in; ++k) acc += w[o * in + k] * x[s * in + k];
            y[static_cast<size_t>(s) * os.c + o] = acc;
          }
        break;
      }
      case Op::kRelu:
        for (size_t k = 0; k < y.size(); ++k) y[k] = std::max(0.0, x[k]);
        break;
      case Op::kMaxPool:
        for (int s = 0; s < n; ++s)
          for (int c = 0; c < os.c; ++c)
            for (int oh = 0; oh < os.h; ++oh)
              for (int ow = 0; ow < os.w; ++ow) {
                double m = -1e300;
                for (int kh = 0; kh < node.kernel; ++kh)
                  for (int kw = 0; kw < node.kernel; ++kw)
                    m = std::max(m, X(s, c, oh * node.stride + kh, ow * node.stride + kw));
                Y(s, c, oh, ow) = m;
              }
        break;
      case Op::kGlobalAvgPool:
        for (int s = 0; s < n; ++s)
          for (int c = 0; c < os.c; ++c) {
            double acc = 0;
            for (int h = 0; h < is.h; ++h)
              for (int ww = 0; ww < is.w; ++ww) acc += X(s, c, h, ww);
            Y(s, c, 0, 0) = acc / (is.h * is.w);
          }
        break;
      case Op::kBatchNorm: {
        const double count = static_cast<double>(n) * is.h * is.w;
        std::vector<double> mean(is.c, 0), var(is.c, 0);
        for (int c = 0; c < is.c; ++c) {
          if (options.training) {
            for (int s = 0; s < n; ++s)
              for (int h = 0; h < is.h; ++h)
                for (int ww = 0; ww < is.w; ++ww) mean[c] += X(s, c, h, ww);
            mean[c] /= count;
            for (int s = 0; s < n; ++s)
              for (int h = 0; h < is.h; ++h)
                for (int ww = 0; ww < is.w; ++ww) {
                  const double d = X(s, c, h, ww) - mean[c];
                  var[c] += d * d;
                }
            var[c] /= count;
          } else {
            mean[c] = options.running_mean[i][c];
            var[c] = options.running_var[i][c];
          }
          const double inv = 1.0 / std::sqrt(var[c] + kBatchNormEpsilon);
          for (int s = 0; s < n; ++s)
            for (int h = 0; h < is.h; ++h)
              for (int ww = 0; ww < is.w; ++ww)
                Y(s, c, h, ww) = w[c] * (X(s, c, h, ww) - mean[c]) * inv + b[c];
        }
        if (bn_mean) (*bn_mean)[i] = mean;
        if (bn_var) (*bn_var)[i] = var;
        break;
      }
      case Op::kDropout:
        for (size_t k = 0; k < y.size(); ++k) {
          const bool keep = !options.training ||
                            DropoutKeep(options.dropout_seed, options.step, static_cast<int>(i),
                                        static_cast<int64_t>(k), node.dropout);
          y[k] = keep ? x[k] / (options.training ? 1.0 - node.dropout : 1.0) : 0.0;
        }
        break;
      case Op::kFlatten:
        y = x;
        break;
      case Op::kAdd: {
        const std::vector<double>& x2 = act[node.inputs[1]];
        for (size_t k = 0; k < y.size(); ++k) y[k] = x[k] + x2[k];
        break;
      }
      case Op::kInput:
        break;
    }
  }
  const std::vector<double>& z = act.back();
  const int classes = graph.nodes.back().out.c;
  if (logits) *logits = z;
  double loss = 0;
  for (int s = 0; s < n; ++s) {
    const double* row = z.data() + static_cast<size_t>(s) * classes;
    const double m = *std::max_element(row, row + classes);
    double sum = 0;
    for (int k = 0; k < classes; ++k) sum += std::exp(row[k] - m);
    loss += std::log(sum) + m - row[labels[s]];
  }
  return loss / n;
}

}  // namespace r2sp::models::testing
