// Network::set_gradient_ready on the CPU backend: during a training step every parameter's
// gradient is reported exactly once, layer by layer from the last to the first, and a range is
// final when it is reported (its values then equal the step's returned gradient).
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

}  // namespace
}  // namespace r2sp::models
