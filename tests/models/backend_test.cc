// CreateNetwork (models/backend.h): the device picks the backend, and a device this binary
// cannot run is a clear error. Run also with --config=cuda for the CUDA half: there "cuda"
// gives a network when a GPU is visible and Unavailable when none is.
#include "models/backend.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "models/cpu/cpu_network.h"
#ifdef R2SP_TEST_WITH_CUDA  // set by BUILD in builds with --config=cuda
#include "models/cuda/cuda_network.h"
#endif

namespace r2sp::models {
namespace {

// How many GPUs this process sees: none in a build without CUDA.
int VisibleGpus() {
#ifdef R2SP_TEST_WITH_CUDA
  return CudaDeviceCount();
#else
  return 0;
#endif
}

TEST(BackendTest, CpuIsTheCpuBackend) {
  const Graph g = BuildMlp({1, 28, 28}, 10);
  std::vector<float> params(g.num_parameters()), grads(params.size()), expected(params.size());
  InitParams(g, 1, params.data());
  std::vector<float> images(2 * g.input.size(), 0.5f);
  const std::vector<int32_t> labels = {3, 7};
  BackendOptions options;
  options.threads = 1;
  options.seed = 4;
  absl::StatusOr<std::unique_ptr<Network>> net = CreateNetwork(g, options);
  ASSERT_TRUE(net.ok()) << net.status();
  absl::StatusOr<std::unique_ptr<Network>> cpu = CreateCpuNetwork(g, CpuOptions{1, 4});
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  absl::StatusOr<float> loss =
      (*net)->TrainStep(params.data(), images.data(), labels.data(), 2, grads.data());
  absl::StatusOr<float> want =
      (*cpu)->TrainStep(params.data(), images.data(), labels.data(), 2, expected.data());
  ASSERT_TRUE(loss.ok() && want.ok());
  EXPECT_TRUE(std::isfinite(*loss));
  EXPECT_EQ(*loss, *want);
  EXPECT_EQ(grads, expected);
}

TEST(BackendTest, UnknownDeviceIsInvalidArgument) {
  BackendOptions options;
  options.device = "tpu";
  absl::StatusOr<std::unique_ptr<Network>> net =
      CreateNetwork(BuildMlp({1, 28, 28}, 10), options);
  EXPECT_EQ(net.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(net.status().message().find("tpu"), absl::string_view::npos);
}

TEST(BackendTest, CudaNeedsABuildWithCuda) {
  BackendOptions options;
  options.device = "cuda";
  absl::StatusOr<std::unique_ptr<Network>> net =
      CreateNetwork(BuildMlp({1, 28, 28}, 10), options);
#ifdef R2SP_TEST_WITH_CUDA
  ASSERT_TRUE(CudaAvailableInBuild());
#else
  ASSERT_FALSE(CudaAvailableInBuild());
#endif
  if (CudaAvailableInBuild() && VisibleGpus() > 0) {
    ASSERT_TRUE(net.ok()) << net.status();
    EXPECT_NE(*net, nullptr);
  } else if (CudaAvailableInBuild()) {
    EXPECT_EQ(net.status(), absl::UnavailableError("no CUDA device is visible"));
  } else {
    EXPECT_EQ(net.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(net.status().message().find("built without CUDA (bazel build --config=cuda)"),
              absl::string_view::npos)
        << net.status();
  }
}

}  // namespace
}  // namespace r2sp::models
