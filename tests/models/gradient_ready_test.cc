// The CPU backend's callbacks for overlapping communication with a training step.
// set_gradient_ready: every parameter's gradient is reported exactly once, layer by layer from
// the last to the first, and a range is final when it is reported (its values then equal the
// step's returned gradient). set_params_needed: every parameter is asked for exactly once, from
// the first layer to the last, before forward reads it (parameters written only when asked for
// give the same step as parameters there from the start).
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "models/cpu/cpu_network.h"

namespace r2sp::models {
namespace {

class GradientReadyTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GradientReadyTest, EveryGradientIsReportedOnceFinalAndLastLayerFirst) {
  const Graph g = *BuildModel(GetParam(), {1, 28, 28}, 10);
  std::vector<float> params(g.num_parameters()), grads(params.size(), -7.0f);
  InitParams(g, 1, params.data());
  std::vector<float> images(4 * g.input.size());
  for (size_t i = 0; i < images.size(); ++i) images[i] = static_cast<float>(i % 13) / 13;
  const std::vector<int32_t> labels = {3, 7, 1, 0};
  absl::StatusOr<std::unique_ptr<Network>> net = CreateCpuNetwork(g, CpuOptions{1, 4});
  ASSERT_TRUE(net.ok()) << net.status();
  std::vector<std::pair<int64_t, int64_t>> ranges;
  std::vector<float> seen(params.size(), -7.0f);  // each range's values when it was reported
  (*net)->set_gradient_ready([&](int64_t offset, int64_t count) {
    ranges.emplace_back(offset, count);
    std::memcpy(seen.data() + offset, grads.data() + offset, count * sizeof(float));
  });
  for (int step = 0; step < 2; ++step) {  // the second step reuses the plan
    ranges.clear();
    ASSERT_TRUE((*net)->TrainStep(params.data(), images.data(), labels.data(), 4, grads.data())
                    .ok());
    ASSERT_GT(ranges.size(), 1u);
    std::vector<int> covered(params.size(), 0);
    for (size_t k = 0; k < ranges.size(); ++k) {
      for (int64_t i = ranges[k].first; i < ranges[k].first + ranges[k].second; ++i) ++covered[i];
      if (k > 0) {
        EXPECT_LT(ranges[k].first, ranges[k - 1].first) << "last layer first";
      }
    }
    EXPECT_EQ(covered, std::vector<int>(params.size(), 1));
    EXPECT_EQ(seen, grads);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, GradientReadyTest, ::testing::Values("mlp", "cnn"));

class ParamsNeededTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ParamsNeededTest, EveryParameterIsAskedForOnceFirstLayerFirstBeforeItIsRead) {
  const Graph g = *BuildModel(GetParam(), {1, 28, 28}, 10);
  std::vector<float> params(g.num_parameters()), grads(params.size()), late_grads(params.size());
  InitParams(g, 1, params.data());
  std::vector<float> images(4 * g.input.size());
  for (size_t i = 0; i < images.size(); ++i) images[i] = static_cast<float>(i % 13) / 13;
  const std::vector<int32_t> labels = {3, 7, 1, 0};
  absl::StatusOr<std::unique_ptr<Network>> net = CreateCpuNetwork(g, CpuOptions{1, 4});
  absl::StatusOr<std::unique_ptr<Network>> late = CreateCpuNetwork(g, CpuOptions{1, 4});
  ASSERT_TRUE(net.ok() && late.ok());
  // `arriving` holds garbage until a range is asked for, as a pull still running would.
  std::vector<float> arriving(params.size());
  std::vector<std::pair<int64_t, int64_t>> ranges;
  EXPECT_TRUE((*late)->set_params_needed([&](int64_t offset, int64_t count) {
    ranges.emplace_back(offset, count);
    std::memcpy(arriving.data() + offset, params.data() + offset, count * sizeof(float));
  }));
  for (int step = 0; step < 2; ++step) {  // the second step reuses the plan
    ranges.clear();
    arriving.assign(params.size(), 1e30f);
    absl::StatusOr<float> loss =
        (*net)->TrainStep(params.data(), images.data(), labels.data(), 4, grads.data());
    absl::StatusOr<float> late_loss =
        (*late)->TrainStep(arriving.data(), images.data(), labels.data(), 4, late_grads.data());
    ASSERT_TRUE(loss.ok() && late_loss.ok());
    EXPECT_EQ(*late_loss, *loss);
    EXPECT_EQ(late_grads, grads);
    ASSERT_GT(ranges.size(), 1u);
    int64_t next = 0;
    for (const auto& [offset, count] : ranges) {
      EXPECT_EQ(offset, next) << "first layer first, each parameter once";
      next = offset + count;
    }
    EXPECT_EQ(next, static_cast<int64_t>(params.size()));
  }
  // Evaluation does not ask: the caller makes the parameters final before it.
  ranges.clear();
  ASSERT_TRUE((*late)->Evaluate(params.data(), images.data(), labels.data(), 4).ok());
  EXPECT_TRUE(ranges.empty());
}

INSTANTIATE_TEST_SUITE_P(Models, ParamsNeededTest, ::testing::Values("mlp", "cnn", "resnet20"));

}  // namespace
}  // namespace r2sp::models
