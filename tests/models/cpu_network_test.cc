// The CPU (oneDNN) backend against the double-precision reference: forward logits, and every
// layer's backward by finite differences of the reference loss. Graphs are chosen so that
// each layer type sits between parameterised layers (its backward-data path is exercised),
// with channel counts that make oneDNN pick blocked layouts as well as plain ones.
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "models/cpu/cpu_network.h"
#include "tests/models/reference_network.h"

namespace r2sp::models {
namespace {

using testing::ReferenceLoss;
using testing::ReferenceOptions;

struct Batch {
  std::vector<float> images;
  std::vector<int32_t> labels;
};

Batch RandomBatch(const Graph& g, int n, uint64_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Batch b;
  b.images.resize(static_cast<size_t>(n) * g.input.size());
  for (float& x : b.images) x = normal(rng);
  for (int s = 0; s < n; ++s) b.labels.push_back(static_cast<int32_t>(rng() % g.num_classes));
  return b;
}

std::vector<double> ToDouble(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Checks logits and gradients of `graph` on a random batch against the reference.
void CheckGradients(const Graph& graph, int batch, int max_checked = 600) {
  SCOPED_TRACE(graph.name);
  std::vector<float> params(graph.num_parameters());
  InitParams(graph, 7, params.data());
  // Non-trivial batch-norm affine parameters.
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> jitter(-0.3f, 0.3f);
  for (float& p : params) p += 0.1f * jitter(rng);
  const Batch b = RandomBatch(graph, batch, 3);
  CpuOptions options;
  options.seed = 5;
  auto net = CreateCpuNetwork(graph, options);
  ASSERT_TRUE(net.ok()) << net.status();
  (*net)->set_step(9);
  std::vector<float> grads(params.size(), -1.0f);
  absl::StatusOr<float> loss =
      (*net)->TrainStep(params.data(), b.images.data(), b.labels.data(), batch, grads.data());
  ASSERT_TRUE(loss.ok()) << loss.status();

  ReferenceOptions ref;
  ref.dropout_seed = 5;
  ref.step = 9;
  std::vector<double> p = ToDouble(params), images = ToDouble(b.images), logits;
  const double ref_loss = ReferenceLoss(graph, p, images, b.labels, batch, ref, &logits);
  EXPECT_NEAR(*loss, ref_loss, 1e-4 * std::max(1.0, std::abs(ref_loss)));
  const float* ours = (*net)->logits();
  for (size_t k = 0; k < logits.size(); ++k) {
    ASSERT_NEAR(ours[k], logits[k], 1e-4 * std::max(1.0, std::abs(logits[k]))) << "logit " << k;
  }
  const int64_t n = static_cast<int64_t>(params.size());
  const int64_t stride = std::max<int64_t>(1, n / max_checked);
  int checked = 0;
  for (int64_t k = 0; k < n; k += stride) {
    const double saved = p[k];
    const double eps = 1e-5;
    p[k] = saved + eps;
    const double up = ReferenceLoss(graph, p, images, b.labels, batch, ref, nullptr);
    p[k] = saved - eps;
    const double down = ReferenceLoss(graph, p, images, b.labels, batch, ref, nullptr);
    p[k] = saved;
    const double numeric = (up - down) / (2 * eps);
    ASSERT_NEAR(grads[k], numeric, 2e-4 + 2e-3 * std::abs(numeric)) << "parameter " << k;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST(CpuNetworkTest, ConvolutionsWithStrideBiasAndPadding) {
  GraphBuilder b("conv", {2, 6, 6}, 5);
  int x = b.Conv(0, "c1", 3, 3, 1, 1, true);
  x = b.Conv(x, "c2", 4, 3, 2, 1, false);
  b.Linear(x, "fc", 5);
  CheckGradients(b.Finish(), 3);
}

TEST(CpuNetworkTest, ReluAndMaxPool) {
  GraphBuilder b("relu_pool", {1, 8, 8}, 3);
  int x = b.Conv(0, "c1", 4, 3, 1, 1, true);
  x = b.Relu(x, "r1");
  x = b.MaxPool(x, "p1", 2, 2);
  b.Linear(x, "fc", 3);
  CheckGradients(b.Finish(), 3);
}

TEST(CpuNetworkTest, BatchNormInTraining) {
  GraphBuilder b("bn", {2, 5, 5}, 3);
  int x = b.Conv(0, "c1", 4, 3, 1, 1, false);
  x = b.BatchNorm(x, "bn1");
  x = b.Relu(x, "r1");
  b.Linear(x, "fc", 3);
  CheckGradients(b.Finish(), 4);
}

TEST(CpuNetworkTest, GlobalAveragePoolIntoLinear) {
  GraphBuilder b("gap", {2, 6, 6}, 4);
  int x = b.Conv(0, "c1", 8, 3, 1, 1, true);
  x = b.GlobalAvgPool(x, "gap");
  b.Linear(x, "fc", 4);
  CheckGradients(b.Finish(), 3);
}

TEST(CpuNetworkTest, ResidualAddAccumulatesGradients) {
  GraphBuilder b("residual", {2, 6, 6}, 3);
  int x = b.Conv(0, "c1", 4, 3, 1, 1, true);
  x = b.Relu(x, "r1");
  int y = b.Conv(x, "c2", 4, 3, 1, 1, false);
  y = b.BatchNorm(y, "bn2");
  x = b.Add(y, x, "add");  // x feeds both c2 and the add
  x = b.Relu(x, "r2");
  b.Linear(x, "fc", 3);
  CheckGradients(b.Finish(), 3);
}

TEST(CpuNetworkTest, FullyConnectedChainWithDropout) {
  GraphBuilder b("mlp_dropout", {1, 4, 4}, 3);
  int x = b.Linear(0, "fc1", 6);
  x = b.Relu(x, "r1");
  x = b.Linear(x, "fc2", 5);
  x = b.Dropout(x, "drop", 0.5f);
  b.Linear(x, "fc3", 3);
  CheckGradients(b.Finish(), 4);
}

TEST(CpuNetworkTest, BlockedLayoutsWithManyChannels) {
  GraphBuilder b("blocked", {3, 8, 8}, 4);
  int x = b.Conv(0, "c1", 16, 3, 1, 1, true);
  x = b.BatchNorm(x, "bn1");
  x = b.Relu(x, "r1");
  x = b.MaxPool(x, "p1", 2, 2);
  x = b.Conv(x, "c2", 32, 3, 1, 1, true);
  x = b.Relu(x, "r2");
  b.Linear(x, "fc", 4);
  CheckGradients(b.Finish(), 2, 400);
}

TEST(CpuNetworkTest, FlattenBeforeLinearAndBeforeOtherLayers) {
  GraphBuilder b("flatten", {3, 6, 6}, 4);
  int x = b.Conv(0, "c1", 16, 3, 1, 1, true);
  x = b.MaxPool(x, "p1", 2, 2);
  int f = b.Flatten(x, "flat");   // read through by fc1
  int y = b.Linear(f, "fc1", 8);
  int z = b.Dropout(f, "drop", 0.25f);  // materialises the flattened view
  z = b.Linear(z, "fc2", 8);
  x = b.Add(y, z, "sum");
  b.Linear(x, "fc3", 4);
  CheckGradients(b.Finish(), 3);
}

TEST(CpuNetworkTest, EvaluationUsesRunningStatistics) {
  GraphBuilder b("bn_eval", {2, 4, 4}, 3);
  int x = b.Conv(0, "c1", 16, 3, 1, 1, false);
  x = b.BatchNorm(x, "bn1");
  x = b.Dropout(x, "drop", 0.3f);  // identity in evaluation
  b.Linear(x, "fc", 3);
  const Graph g = b.Finish();
  std::vector<float> params(g.num_parameters()), grads(g.num_parameters());
  InitParams(g, 1, params.data());
  const Batch batch = RandomBatch(g, 5, 2);
  auto net = CreateCpuNetwork(g, CpuOptions());
  ASSERT_TRUE(net.ok());
  ASSERT_TRUE((*net)->TrainStep(params.data(), batch.images.data(), batch.labels.data(), 5,
                                grads.data()).ok());
  absl::StatusOr<EvalResult> eval =
      (*net)->Evaluate(params.data(), batch.images.data(), batch.labels.data(), 5);
  ASSERT_TRUE(eval.ok());

  // Reference: one training pass gives the batch statistics; running = (1 - m) * init + m * batch.
  std::vector<double> p = ToDouble(params), images = ToDouble(batch.images), logits;
  std::vector<std::vector<double>> mean, var;
  ReferenceOptions ref;
  ReferenceLoss(g, p, images, batch.labels, 5, ref, nullptr, &mean, &var);
  ref.training = false;
  ref.running_mean.assign(g.nodes.size(), {});
  ref.running_var.assign(g.nodes.size(), {});
  const double count = 5.0 * 4 * 4;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (size_t c = 0; c < mean[i].size(); ++c) {
      const double m = kBatchNormMomentum;
      ref.running_mean[i].push_back(m * mean[i][c]);
      ref.running_var[i].push_back((1 - m) + m * var[i][c] * count / (count - 1));
    }
  }
  const double loss = ReferenceLoss(g, p, images, batch.labels, 5, ref, &logits);
  EXPECT_NEAR(eval->loss_sum / 5, loss, 1e-4);
  for (size_t k = 0; k < logits.size(); ++k) {
    ASSERT_NEAR((*net)->logits()[k], logits[k], 1e-4) << k;
  }
}

// The running statistics come out in node order (means, then variances) and go into another
// network, which then evaluates exactly as the first: what a model file carries.
TEST(CpuNetworkTest, BatchNormStatisticsMoveBetweenNetworks) {
  GraphBuilder b("bn_two", {2, 4, 4}, 3);
  int x = b.Conv(0, "c1", 8, 3, 1, 1, false);
  x = b.BatchNorm(x, "bn1");
  x = b.Conv(x, "c2", 16, 3, 1, 1, false);
  x = b.BatchNorm(x, "bn2");
  b.Linear(x, "fc", 3);
  const Graph g = b.Finish();
  ASSERT_EQ(g.BatchNormStatisticsSize(), 2 * 8 + 2 * 16);
  std::vector<float> params(g.num_parameters()), grads(g.num_parameters());
  InitParams(g, 1, params.data());
  const Batch batch = RandomBatch(g, 6, 3);
  auto trained = CreateCpuNetwork(g, CpuOptions());
  auto fresh = CreateCpuNetwork(g, CpuOptions());
  ASSERT_TRUE(trained.ok() && fresh.ok());
  // A plan built before the statistics arrive must see them too (they are set in place).
  ASSERT_TRUE((*fresh)->Evaluate(params.data(), batch.images.data(), batch.labels.data(), 6).ok());
  const std::vector<float> initial = (*fresh)->BatchNormStatistics();
  ASSERT_EQ(initial.size(), 48u);
  EXPECT_EQ(initial[0], 0.0f);  // bn1's first mean
  EXPECT_EQ(initial[8], 1.0f);  // bn1's first variance
  for (int s = 0; s < 3; ++s) {
    ASSERT_TRUE((*trained)->TrainStep(params.data(), batch.images.data(), batch.labels.data(), 6,
                                      grads.data()).ok());
  }
  const std::vector<float> stats = (*trained)->BatchNormStatistics();
  EXPECT_NE(stats, initial);
  ASSERT_TRUE((*fresh)->SetBatchNormStatistics(stats).ok());
  EXPECT_EQ((*fresh)->BatchNormStatistics(), stats);
  auto a = (*trained)->Evaluate(params.data(), batch.images.data(), batch.labels.data(), 6);
  auto c = (*fresh)->Evaluate(params.data(), batch.images.data(), batch.labels.data(), 6);
  ASSERT_TRUE(a.ok() && c.ok());
  EXPECT_EQ(a->loss_sum, c->loss_sum);
  EXPECT_EQ(a->correct, c->correct);
  EXPECT_TRUE(absl::IsInvalidArgument(
      (*fresh)->SetBatchNormStatistics(std::vector<float>(47, 0.0f))));
  EXPECT_EQ((*fresh)->BatchNormStatistics(), stats);  // unchanged by the refused call
}

TEST(CpuNetworkTest, ChangingBatchSizeKeepsWorking) {
  const Graph g = BuildMlp({1, 28, 28}, 10);
  std::vector<float> params(g.num_parameters()), grads(g.num_parameters());
  InitParams(g, 1, params.data());
  auto net = CreateCpuNetwork(g, CpuOptions());
  ASSERT_TRUE(net.ok());
  for (int n : {8, 3, 8, 1}) {
    const Batch b = RandomBatch(g, n, n);
    absl::StatusOr<float> loss =
        (*net)->TrainStep(params.data(), b.images.data(), b.labels.data(), n, grads.data());
    ASSERT_TRUE(loss.ok());
    std::vector<double> logits;
    const double ref = ReferenceLoss(g, ToDouble(params), ToDouble(b.images), b.labels, n,
                                     ReferenceOptions(), &logits);
    EXPECT_NEAR(*loss, ref, 1e-4) << "batch " << n;
  }
}

TEST(CpuNetworkTest, BadLabelsAndBatchesAreErrors) {
  const Graph g = BuildMlp({1, 28, 28}, 10);
  std::vector<float> params(g.num_parameters()), grads(g.num_parameters());
  auto net = CreateCpuNetwork(g, CpuOptions());
  ASSERT_TRUE(net.ok());
  Batch b = RandomBatch(g, 2, 1);
  b.labels[1] = 10;
  EXPECT_TRUE(absl::IsInvalidArgument(
      (*net)->TrainStep(params.data(), b.images.data(), b.labels.data(), 2, grads.data()).status()));
  EXPECT_FALSE((*net)->TrainStep(params.data(), b.images.data(), b.labels.data(), 0,
                                 grads.data()).ok());
}

}  // namespace
}  // namespace r2sp::models
