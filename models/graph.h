// A backend-independent description of a network: a list of nodes in execution order (each
// reading earlier nodes' outputs), with shapes inferred and the trainable parameters listed in
// the order the parameter servers lay them out. Backends (CPU/oneDNN, CUDA) execute it.
#ifndef R2SP_MODELS_GRAPH_H_
#define R2SP_MODELS_GRAPH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace r2sp::models {

// Batch norm as PyTorch defines it, shared by every backend and the tests' reference network:
// y = (x - mean) / sqrt(var + epsilon) * scale + shift, and after each training step
// running = (1 - momentum) * running + momentum * batch statistic (the variance unbiased).
// Doubles because cuDNN takes doubles; the CPU backend converts them to the same floats.
inline constexpr double kBatchNormEpsilon = 1e-5;
inline constexpr double kBatchNormMomentum = 0.1;

// N is not part of a Shape: every shape is per sample, NCHW order without N.
struct Shape {
  int c = 0, h = 1, w = 1;
  int64_t size() const { return int64_t{c} * h * w; }
  bool operator==(const Shape& o) const { return c == o.c && h == o.h && w == o.w; }
};

enum class Op {
  kInput,      // the batch of images
  kConv,       // 2-D convolution (square kernel, symmetric padding), optional bias
  kLinear,     // fully connected; a 3-D input is flattened in C,H,W order
  kRelu,
  kMaxPool,    // square window
  kGlobalAvgPool,
  kBatchNorm,  // per-channel, batch statistics in training, running statistics in eval
  kDropout,
  kAdd,        // elementwise sum of two inputs (residual connection)
  kFlatten,    // (C, H, W) -> (C*H*W, 1, 1), in C,H,W order; a view where backends can
};

struct Node {
  Op op;
  std::string name;
  std::vector<int> inputs;  // indices of earlier nodes
  Shape out;
  // Attributes (meaning depends on op).
  int kernel = 0, stride = 1, pad = 0;
  bool bias = false;
  float dropout = 0.0f;
  // Index of this node's first parameter in Graph::params, or -1.
  int first_param = -1;
};

enum class Init { kHeNormal, kLinearUniform, kBiasUniform, kOnes, kZeros };

struct Param {
  std::string name;
  std::vector<int64_t> dims;  // e.g. {out, in, kh, kw} for conv weights (OIHW)
  Init init;
  int64_t fan_in;
  int64_t size() const;
};

// The parameters of one node: Graph::params [first_param, end_param), which are
// [offset, offset + count) of the flat array. Backends move and report gradients by group.
struct ParamGroup {
  int node = 0;
  int first_param = 0, end_param = 0;
  int64_t offset = 0, count = 0;
};

struct Graph {
  std::string name;
  Shape input;
  int num_classes = 10;
  std::vector<Node> nodes;  // nodes[0] is the input; the last node gives the logits
  std::vector<Param> params;

  int64_t num_parameters() const;
  // The model as the parameter servers see it: one TensorSpec per parameter, in order.
  // One group per node with parameters, in node order. Parameters are laid out in node order,
  // so a node's group runs up to the next such node's first parameter.
  std::vector<ParamGroup> ParamGroups() const;
  // 2 x channels per batch-norm node: its running means and variances (Network's order).
  int64_t BatchNormStatisticsSize() const;
};

// Appends nodes with shape inference and parameter bookkeeping. Each method takes the input
// node's index and returns the new node's index.
class GraphBuilder {
 public:
  GraphBuilder(std::string name, Shape input, int num_classes);
  int Conv(int in, const std::string& name, int out_channels, int kernel, int stride, int pad,
           bool bias);
  int Linear(int in, const std::string& name, int out);
  int Relu(int in, const std::string& name);
  int MaxPool(int in, const std::string& name, int kernel, int stride);
  int GlobalAvgPool(int in, const std::string& name);
  int BatchNorm(int in, const std::string& name);
  int Dropout(int in, const std::string& name, float p);
  int Add(int a, int b, const std::string& name);
  int Flatten(int in, const std::string& name);
  const Shape& shape(int node) const { return g_.nodes[node].out; }
  Graph Finish() { return std::move(g_); }

 private:
  int Append(Node n);
  int AddParam(std::string name, std::vector<int64_t> dims, Init init, int64_t fan_in);
  Graph g_;
};

// Dropout keeps element i of node `node` at training step `step` iff this returns true;
// a pure function so that tests can reproduce the masks.
bool DropoutKeep(uint64_t seed, int64_t step, int node, int64_t i, float p);

// The models of the project. `input` is the data set's image shape.
absl::StatusOr<Graph> BuildModel(const std::string& name, Shape input, int num_classes);
Graph BuildMlp(Shape input, int num_classes);      // 784-256-128-10, ReLU
Graph BuildCnn(Shape input, int num_classes);      // 2 conv 5x5 (32, 64) + pool, fc 1024, fc 10
Graph BuildResNet20(Shape input, int num_classes);  // He et al.'s CIFAR ResNet-20

// Deterministic initial parameters for the whole flat model (size num_parameters()).
void InitParams(const Graph& graph, uint64_t seed, float* params);

}  // namespace r2sp::models

#endif  // R2SP_MODELS_GRAPH_H_
