// Model builders, shape inference and initialisation; see graph.h.
#include "models/graph.h"

#include "models/dropout_hash.h"

#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace r2sp::models {

int64_t Param::size() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

int64_t Graph::num_parameters() const {
  int64_t n = 0;
  for (const Param& p : params) n += p.size();
  return n;
}

int64_t Graph::BatchNormStatisticsSize() const {
  int64_t n = 0;
  for (const Node& node : nodes) n += node.op == Op::kBatchNorm ? 2 * node.out.c : 0;
  return n;
}

std::vector<ParamGroup> Graph::ParamGroups() const {
  std::vector<ParamGroup> groups;
  std::vector<int64_t> offsets(params.size() + 1, 0);
  for (size_t p = 0; p < params.size(); ++p) offsets[p + 1] = offsets[p] + params[p].size();
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].first_param < 0) continue;
    if (!groups.empty()) groups.back().end_param = nodes[i].first_param;
    ParamGroup g;
    g.node = static_cast<int>(i);
    g.first_param = nodes[i].first_param;
    groups.push_back(g);
  }
  if (!groups.empty()) groups.back().end_param = static_cast<int>(params.size());
  for (ParamGroup& g : groups) {
    g.offset = offsets[g.first_param];
    g.count = offsets[g.end_param] - g.offset;
  }
  return groups;
}

GraphBuilder::GraphBuilder(std::string name, Shape input, int num_classes) {
  g_.name = std::move(name);
  g_.input = input;
  g_.num_classes = num_classes;
  g_.nodes.push_back(Node{Op::kInput, "input", {}, input});
}

int GraphBuilder::Append(Node n) {
  g_.nodes.push_back(std::move(n));
  return static_cast<int>(g_.nodes.size()) - 1;
}

int GraphBuilder::AddParam(std::string name, std::vector<int64_t> dims, Init init,
                           int64_t fan_in) {
  g_.params.push_back({std::move(name), std::move(dims), init, fan_in});
  return static_cast<int>(g_.params.size()) - 1;
}

int GraphBuilder::Conv(int in, const std::string& name, int out_channels, int kernel, int stride,
                       int pad, bool bias) {
  const Shape s = shape(in);
  Node n{Op::kConv, name, {in}};
  n.kernel = kernel, n.stride = stride, n.pad = pad, n.bias = bias;
  n.out = {out_channels, (s.h + 2 * pad - kernel) / stride + 1,
           (s.w + 2 * pad - kernel) / stride + 1};
  CHECK(n.out.h > 0 && n.out.w > 0) << name << ": input too small";
  const int64_t fan_in = int64_t{s.c} * kernel * kernel;
  n.first_param = AddParam(name + ".weight", {out_channels, s.c, kernel, kernel},
                           Init::kHeNormal, fan_in);
  if (bias) AddParam(name + ".bias", {out_channels}, Init::kBiasUniform, fan_in);
  return Append(std::move(n));
}

int GraphBuilder::Linear(int in, const std::string& name, int out) {
  const int64_t fan_in = shape(in).size();
  Node n{Op::kLinear, name, {in}, {out, 1, 1}};
  n.bias = true;
  n.first_param = AddParam(name + ".weight", {out, fan_in}, Init::kLinearUniform, fan_in);
  AddParam(name + ".bias", {out}, Init::kBiasUniform, fan_in);
  return Append(std::move(n));
}

int GraphBuilder::Relu(int in, const std::string& name) {
  return Append({Op::kRelu, name, {in}, shape(in)});
}

int GraphBuilder::MaxPool(int in, const std::string& name, int kernel, int stride) {
  const Shape s = shape(in);
  Node n{Op::kMaxPool, name, {in},
         {s.c, (s.h - kernel) / stride + 1, (s.w - kernel) / stride + 1}};
  n.kernel = kernel, n.stride = stride;
  return Append(std::move(n));
}

int GraphBuilder::GlobalAvgPool(int in, const std::string& name) {
  return Append({Op::kGlobalAvgPool, name, {in}, {shape(in).c, 1, 1}});
}

int GraphBuilder::BatchNorm(int in, const std::string& name) {
  Node n{Op::kBatchNorm, name, {in}, shape(in)};
  n.first_param = AddParam(name + ".weight", {shape(in).c}, Init::kOnes, 1);
  AddParam(name + ".bias", {shape(in).c}, Init::kZeros, 1);
  return Append(std::move(n));
}

int GraphBuilder::Dropout(int in, const std::string& name, float p) {
  CHECK(p >= 0 && p < 1) << name << ": dropout probability must be in [0, 1)";
  Node n{Op::kDropout, name, {in}, shape(in)};
  n.dropout = p;
  return Append(std::move(n));
}

int GraphBuilder::Add(int a, int b, const std::string& name) {
  CHECK(shape(a) == shape(b)) << name << ": shapes differ";
  return Append({Op::kAdd, name, {a, b}, shape(a)});
}

int GraphBuilder::Flatten(int in, const std::string& name) {
  return Append({Op::kFlatten, name, {in}, {static_cast<int>(shape(in).size()), 1, 1}});
}

bool DropoutKeep(uint64_t seed, int64_t step, int node, int64_t i, float p) {
  return DropoutKeepHash(seed, step, node, i, p);
}

Graph BuildMlp(Shape input, int num_classes) {
  GraphBuilder b("mlp", input, num_classes);
  int x = b.Flatten(0, "flatten");
  x = b.Linear(x, "fc1", 256);
  x = b.Relu(x, "relu1");
  x = b.Linear(x, "fc2", 128);
  x = b.Relu(x, "relu2");
  b.Linear(x, "fc3", num_classes);
  return b.Finish();
}

Graph BuildCnn(Shape input, int num_classes) {
  GraphBuilder b("cnn", input, num_classes);
  int x = b.Conv(0, "conv1", 32, 5, 1, 2, true);
  x = b.Relu(x, "relu1");
  x = b.MaxPool(x, "pool1", 2, 2);
  x = b.Conv(x, "conv2", 64, 5, 1, 2, true);
  x = b.Relu(x, "relu2");
  x = b.MaxPool(x, "pool2", 2, 2);
  x = b.Flatten(x, "flatten");  // 7x7x64 = 3136
  x = b.Linear(x, "fc1", 1024);
  x = b.Relu(x, "relu3");
  b.Linear(x, "fc2", num_classes);
  return b.Finish();
}

Graph BuildResNet20(Shape input, int num_classes) {
  GraphBuilder b("resnet20", input, num_classes);
  int x = b.Conv(0, "conv1", 16, 3, 1, 1, false);
  x = b.BatchNorm(x, "bn1");
  x = b.Relu(x, "relu1");
  const int widths[] = {16, 32, 64};
  for (int stage = 0; stage < 3; ++stage) {
    for (int block = 0; block < 3; ++block) {
      const std::string p = absl::StrCat("layer", stage + 1, ".", block);
      const int stride = (stage > 0 && block == 0) ? 2 : 1;
      const int w = widths[stage];
      int y = b.Conv(x, p + ".conv1", w, 3, stride, 1, false);
      y = b.BatchNorm(y, p + ".bn1");
      y = b.Relu(y, p + ".relu1");
      y = b.Conv(y, p + ".conv2", w, 3, 1, 1, false);
      y = b.BatchNorm(y, p + ".bn2");
      int shortcut = x;
      if (stride != 1 || b.shape(x).c != w) {
        // Projection shortcut (1x1 conv + BN) at the two downsampling points; see
        // docs/ARCHITECTURE.md (the models) for why not the zero-padding variant.
        shortcut = b.Conv(x, p + ".shortcut.conv", w, 1, stride, 0, false);
        shortcut = b.BatchNorm(shortcut, p + ".shortcut.bn");
      }
      x = b.Add(y, shortcut, p + ".add");
      x = b.Relu(x, p + ".relu2");
    }
  }
  x = b.GlobalAvgPool(x, "avgpool");
  x = b.Flatten(x, "flatten");
  b.Linear(x, "fc", num_classes);
  return b.Finish();
}

absl::StatusOr<Graph> BuildModel(const std::string& name, Shape input, int num_classes) {
  if (input.c < 1 || input.h < 1 || input.w < 1 || num_classes < 2) {
    return absl::InvalidArgumentError("bad input shape or class count");
  }
  if (name == "mlp") return BuildMlp(input, num_classes);
  if (name == "cnn") {
    if (input.h % 4 != 0 || input.w % 4 != 0) {
      return absl::InvalidArgumentError("cnn needs image sides divisible by 4");
    }
    return BuildCnn(input, num_classes);
  }
  if (name == "resnet20") {
    if (input.h % 4 != 0 || input.w % 4 != 0) {
      return absl::InvalidArgumentError("resnet20 needs image sides divisible by 4");
    }
    return BuildResNet20(input, num_classes);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown model '", name, "' (mlp, cnn, resnet20)"));
}

void InitParams(const Graph& graph, uint64_t seed, float* params) {
  std::mt19937_64 rng(seed);
  int64_t offset = 0;
  for (const Param& p : graph.params) {
    float* out = params + offset;
    const int64_t n = p.size();
    const double bound = 1.0 / std::sqrt(static_cast<double>(p.fan_in));
    switch (p.init) {
      case Init::kHeNormal: {  // Kaiming normal, fan_in, ReLU gain
        std::normal_distribution<float> dist(0.0f, static_cast<float>(std::sqrt(2.0 / p.fan_in)));
        for (int64_t i = 0; i < n; ++i) out[i] = dist(rng);
        break;
      }
      case Init::kLinearUniform:  // PyTorch's Linear default: U(-1/sqrt(fan_in), +)
      case Init::kBiasUniform: {
        std::uniform_real_distribution<float> dist(-bound, bound);
        for (int64_t i = 0; i < n; ++i) out[i] = dist(rng);
        break;
      }
      case Init::kOnes:
        for (int64_t i = 0; i < n; ++i) out[i] = 1.0f;
        break;
      case Init::kZeros:
        for (int64_t i = 0; i < n; ++i) out[i] = 0.0f;
        break;
    }
    offset += n;
  }
}

}  // namespace r2sp::models
