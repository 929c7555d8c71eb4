// The script optimizer's wire form (common/wire/optimizer_runs.h): the settings a server accepts
// (torch's bounds, each refusal naming its setting), a partition's runs decoded or refused
// (ends that must rise strictly to the partition's size), and a model's parameter groups cut
// into each partition's runs over a layout that splits one tensor and packs small ones.
#include "common/wire/optimizer_runs.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace r2sp::wire {
namespace {

using ::testing::HasSubstr;

proto::OptimizerSettings Sgd(double lr, double momentum = 0, double dampening = 0,
                             bool nesterov = false) {
  proto::OptimizerSettings s;
  s.set_kind(proto::OPTIMIZER_SGD);
  s.set_lr(lr);
  s.set_weight_decay(1e-4);
  s.set_momentum(momentum);
  s.set_dampening(dampening);
  s.set_nesterov(nesterov);
  return s;
}

proto::OptimizerSettings Adam(proto::OptimizerKind kind, double lr) {
  proto::OptimizerSettings s;
  s.set_kind(kind);
  s.set_lr(lr);
  s.set_weight_decay(0.01);
  s.set_beta1(0.9);
  s.set_beta2(0.999);
  s.set_eps(1e-8);
  return s;
}

// Expects InvalidArgument with `text` in its message.
void ExpectRefused(const absl::Status& status, const std::string& text) {
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(text));
}

void ExpectSettingsRefused(const proto::OptimizerSettings& s, const std::string& text) {
  ExpectRefused(CheckOptimizerSettings(s), text);
}

TEST(CheckOptimizerSettingsTest, AcceptsTorchsSettings) {
  EXPECT_TRUE(CheckOptimizerSettings(Sgd(0.1)).ok());
  EXPECT_TRUE(CheckOptimizerSettings(Sgd(0.1, 0.9, 0.5)).ok());
  EXPECT_TRUE(CheckOptimizerSettings(Sgd(0.1, 0.9, 0, /*nesterov=*/true)).ok());
  EXPECT_TRUE(CheckOptimizerSettings(Sgd(0, 0, 1)).ok());  // lr 0 and dampening 1: closed ends
  EXPECT_TRUE(CheckOptimizerSettings(Adam(proto::OPTIMIZER_ADAM, 1e-3)).ok());
  EXPECT_TRUE(CheckOptimizerSettings(Adam(proto::OPTIMIZER_ADAMW, 1e-3)).ok());
  proto::OptimizerSettings zero_betas = Adam(proto::OPTIMIZER_ADAM, 1e-3);
  zero_betas.set_beta1(0);
  zero_betas.set_beta2(0);
  EXPECT_TRUE(CheckOptimizerSettings(zero_betas).ok());
  proto::OptimizerSettings average;
  average.set_kind(proto::OPTIMIZER_AVERAGE);
  EXPECT_TRUE(CheckOptimizerSettings(average).ok());
}

TEST(CheckOptimizerSettingsTest, RefusesEachSettingOutOfRangeNamingIt) {
  proto::OptimizerSettings s = Sgd(0.1);
  s.set_kind(proto::OPTIMIZER_UNSPECIFIED);
  ExpectSettingsRefused(s, "unknown optimizer kind 0");

  ExpectSettingsRefused(Sgd(-1), "lr -1 is outside");
  ExpectSettingsRefused(Sgd(std::nan("")), "lr nan is outside");
  ExpectSettingsRefused(Sgd(std::numeric_limits<double>::infinity()), "lr inf is outside");
  s = Sgd(0.1);
  s.set_weight_decay(-0.5);
  ExpectSettingsRefused(s, "weight_decay -0.5 is outside");

  ExpectSettingsRefused(Sgd(0.1, /*momentum=*/1), "momentum 1 is outside [0, 1)");
  ExpectSettingsRefused(Sgd(0.1, 0.9, /*dampening=*/1.5), "dampening 1.5 is outside [0, 1]");
  ExpectSettingsRefused(Sgd(0.1, /*momentum=*/0, 0, /*nesterov=*/true),
                        "nesterov needs momentum > 0 and dampening 0");
  ExpectSettingsRefused(Sgd(0.1, 0.9, /*dampening=*/0.1, /*nesterov=*/true),
                        "nesterov needs momentum > 0 and dampening 0 (got momentum 0.9, "
                        "dampening 0.1)");

  s = Adam(proto::OPTIMIZER_ADAM, 1e-3);
  s.set_beta1(1.0);
  ExpectSettingsRefused(s, "beta1 1 is outside [0, 1)");
  s = Adam(proto::OPTIMIZER_ADAMW, 1e-3);
  s.set_beta2(-0.1);
  ExpectSettingsRefused(s, "beta2 -0.1 is outside [0, 1)");
  s = Adam(proto::OPTIMIZER_ADAM, 1e-3);
  s.set_eps(0);
  ExpectSettingsRefused(s, "eps 0 is not > 0");
}

// A partition optimizer with runs ending at `ends`, run i having lr 0.1 * (i + 1).
proto::PartitionOptimizer Runs(const std::vector<uint64_t>& ends) {
  proto::PartitionOptimizer optimizer;
  for (size_t i = 0; i < ends.size(); ++i) {
    proto::OptimizerRun* run = optimizer.add_runs();
    run->set_end(ends[i]);
    *run->mutable_settings() = Sgd(0.1 * (i + 1));
  }
  return optimizer;
}

TEST(DecodeOptimizerRunsTest, GivesEachRunsRangeAndSettings) {
  proto::PartitionOptimizer optimizer = Runs({2, 4});
  *optimizer.mutable_runs(1)->mutable_settings() = Adam(proto::OPTIMIZER_ADAMW, 1e-3);
  absl::StatusOr<std::vector<OptimizerRun>> runs = DecodeOptimizerRuns(optimizer, 4);
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[0].begin, 0u);
  EXPECT_EQ((*runs)[0].end, 2u);
  EXPECT_EQ((*runs)[0].settings.kind(), proto::OPTIMIZER_SGD);
  EXPECT_EQ((*runs)[0].settings.lr(), 0.1);
  EXPECT_EQ((*runs)[1].begin, 2u);
  EXPECT_EQ((*runs)[1].end, 4u);
  EXPECT_EQ((*runs)[1].settings.kind(), proto::OPTIMIZER_ADAMW);
  EXPECT_EQ((*runs)[1].settings.lr(), 1e-3);

  runs = DecodeOptimizerRuns(Runs({7}), 7);  // one run over the whole partition
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ((*runs)[0].begin, 0u);
  EXPECT_EQ((*runs)[0].end, 7u);
}

TEST(DecodeOptimizerRunsTest, RefusesRunsThatDoNotTileThePartition) {
  ExpectRefused(DecodeOptimizerRuns(Runs({}), 4).status(), "no runs");
  ExpectRefused(DecodeOptimizerRuns(Runs({0, 4}), 4).status(), "run 0 ends at 0 after 0");
  ExpectRefused(DecodeOptimizerRuns(Runs({2, 2, 4}), 4).status(), "run 1 ends at 2 after 2");
  ExpectRefused(DecodeOptimizerRuns(Runs({3, 1, 4}), 4).status(), "run 1 ends at 1 after 3");
  ExpectRefused(DecodeOptimizerRuns(Runs({2, 5}), 4).status(),
                "run 1 ends at 5 after 2; ends must rise strictly up to the partition's 4");
  ExpectRefused(DecodeOptimizerRuns(Runs({1, 3}), 4).status(),
                "the runs cover 3 of the partition's 4 values");
}

TEST(DecodeOptimizerRunsTest, RefusesBadSettingsInALaterRun) {
  proto::PartitionOptimizer optimizer = Runs({2, 4});
  optimizer.mutable_runs(1)->mutable_settings()->set_lr(-0.5);
  ExpectRefused(DecodeOptimizerRuns(optimizer, 4).status(), "lr -0.5 is outside");
  optimizer = Runs({2, 4});
  optimizer.mutable_runs(1)->mutable_settings()->set_momentum(1.5);
  ExpectRefused(DecodeOptimizerRuns(optimizer, 4).status(), "momentum 1.5 is outside");
}

// Tensors a(3) b(2) c(2) d(10) e(1) f(1) in partitions of at most 8 values: a, b and c share
// key 0; d is split into keys 1 and 2 (5 values each); e and f share key 3.
ModelLayout SixTensorLayout() {
  std::vector<proto::TensorSpec> specs;
  const std::vector<std::pair<std::string, uint64_t>> sizes = {
      {"a", 3}, {"b", 2}, {"c", 2}, {"d", 10}, {"e", 1}, {"f", 1}};
  for (const auto& [name, n] : sizes) {
    proto::TensorSpec t;
    t.set_name(name);
    t.set_num_elements(n);
    specs.push_back(t);
  }
  return ModelLayout::Create(specs, 8 * sizeof(float), 2).value();
}

// The (end, lr) of each of a partition's runs.
std::vector<std::pair<uint64_t, double>> EndsAndRates(const proto::PartitionOptimizer& p) {
  std::vector<std::pair<uint64_t, double>> out;
  for (const proto::OptimizerRun& run : p.runs()) out.emplace_back(run.end(), run.settings().lr());
  return out;
}

TEST(EncodeOptimizerRunsTest, CutsGroupsIntoEachPartitionsRuns) {
  const ModelLayout layout = SixTensorLayout();
  ASSERT_EQ(layout.partitions().size(), 4u);
  const std::vector<proto::OptimizerSettings> groups = {Sgd(0.5, 0.9),
                                                        Adam(proto::OPTIMIZER_ADAMW, 0.25)};
  // a, b in group 0 (one run of 5), c and d in group 1, e in 0 and f in 1.
  absl::StatusOr<std::vector<proto::PartitionOptimizer>> runs =
      EncodeOptimizerRuns(layout, {0, 0, 1, 1, 0, 1}, groups);
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 4u);
  using Runs = std::vector<std::pair<uint64_t, double>>;
  EXPECT_EQ(EndsAndRates((*runs)[0]), (Runs{{5, 0.5}, {7, 0.25}}));
  EXPECT_EQ(EndsAndRates((*runs)[1]), (Runs{{5, 0.25}}));
  EXPECT_EQ(EndsAndRates((*runs)[2]), (Runs{{5, 0.25}}));
  EXPECT_EQ(EndsAndRates((*runs)[3]), (Runs{{1, 0.5}, {2, 0.25}}));
  // The settings travel whole.
  EXPECT_EQ((*runs)[0].runs(0).settings().momentum(), 0.9);
  EXPECT_EQ((*runs)[0].runs(1).settings().kind(), proto::OPTIMIZER_ADAMW);
  EXPECT_EQ((*runs)[0].runs(1).settings().beta2(), 0.999);
  // What a worker encodes, a server decodes.
  for (const Partition& p : layout.partitions()) {
    EXPECT_TRUE(DecodeOptimizerRuns((*runs)[p.key], p.num_elements).ok()) << p.key;
  }

  // One group for every tensor: one run per partition.
  runs = EncodeOptimizerRuns(layout, {1, 1, 1, 1, 1, 1}, groups);
  ASSERT_TRUE(runs.ok()) << runs.status();
  EXPECT_EQ(EndsAndRates((*runs)[0]), (Runs{{7, 0.25}}));
  EXPECT_EQ(EndsAndRates((*runs)[3]), (Runs{{2, 0.25}}));
}

TEST(EncodeOptimizerRunsTest, RefusesGroupsThatDoNotFitTheModel) {
  const ModelLayout layout = SixTensorLayout();
  const std::vector<proto::OptimizerSettings> groups = {Sgd(0.5), Sgd(0.25)};
  ExpectRefused(EncodeOptimizerRuns(layout, {0, 0, 1, 1, 0}, groups).status(),
                "5 tensor groups for a model of 6 tensors");
  ExpectRefused(EncodeOptimizerRuns(layout, {0, 0, 1, 2, 0, 1}, groups).status(),
                "tensor 'd' is in group 2 of 2");
  ExpectRefused(EncodeOptimizerRuns(layout, {0, -1, 1, 1, 0, 1}, groups).status(),
                "tensor 'b' is in group -1 of 2");
  ExpectRefused(EncodeOptimizerRuns(layout, {0, 0, 1, 1, 0, 1}, {Sgd(0.5), Sgd(-1)}).status(),
                "lr -1 is outside");
}

}  // namespace
}  // namespace r2sp::wire
