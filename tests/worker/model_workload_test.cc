// ModelWorkload's gradients for the pushes: fp32 from a backend that cannot encode them (the
// CPU's, also when fp16 gradients are asked for), and binary16 from one that does (a GPU's,
// stood in for by a network that encodes the CPU backend's gradient on the host): the step and
// every ready range hand over the fp16 array, which is the array pinned, and the network writes
// fp32 again once the workload is gone. An evaluation reports progress batch by batch.
#include "worker/model_workload.h"

#include <cstring>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "common/codec/fp16.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "models/backend.h"

namespace r2sp {
namespace {

// The CPU backend's step, then its gradient encoded to binary16 group by group, each group
// reported as it is written: what the CUDA backend hands the host, without a GPU.
class EncodingNetwork : public models::Network {
 public:
  explicit EncodingNetwork(std::unique_ptr<models::Network> inner)
      : Network(inner->graph()), inner_(std::move(inner)), fp32_(graph_.num_parameters()) {}

  absl::StatusOr<float> TrainStep(const float* params, const float* images,
                                  const int32_t* labels, int batch, float* grads) override {
    absl::StatusOr<float> loss = inner_->TrainStep(params, images, labels, batch, fp32_.data());
    float* out = grads;
    if (fp16_grads_ != nullptr) out = nullptr;
    for (const models::ParamGroup& g : graph_.ParamGroups()) {
      if (out != nullptr) {
        std::memcpy(out + g.offset, fp32_.data() + g.offset, g.count * sizeof(float));
      } else {
        codec::EncodeFp16(fp32_.data() + g.offset, g.count, fp16_grads_ + g.offset);
      }
      if (gradient_ready_) gradient_ready_(g.offset, g.count);
    }
    return loss;
  }
  absl::StatusOr<models::EvalResult> Evaluate(const float* params, const float* images,
                                              const int32_t* labels, int batch) override {
    return inner_->Evaluate(params, images, labels, batch);
  }
  const float* logits() const override { return inner_->logits(); }
  std::vector<float> BatchNormStatistics() const override {
    return inner_->BatchNormStatistics();
  }
  absl::Status SetBatchNormStatistics(const std::vector<float>& stats) override {
    return inner_->SetBatchNormStatistics(stats);
  }
  absl::StatusOr<std::unique_ptr<models::PinnedHostMemory>> PinHostMemory(
      void* data, size_t bytes) override {
    pinned_.emplace_back(data, bytes);
    return std::make_unique<models::PinnedHostMemory>();
  }

  bool writing_fp16() const { return fp16_grads_ != nullptr; }
  std::vector<std::pair<void*, size_t>> pinned_;

 protected:
  bool WritesFp16Gradients() const override { return true; }

 private:
  std::unique_ptr<models::Network> inner_;
  std::vector<float> fp32_;
};

class ModelWorkloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_.name = "tiny";
    data_.shape = {1, 28, 28};
    for (int i = 0; i < 8; ++i) data_.labels.push_back(i % 10);
    data_.pixels.resize(8 * 28 * 28);
    for (size_t i = 0; i < data_.pixels.size(); ++i) data_.pixels[i] = (i * 37) % 251;
    data_.mean = {0.3f};
    data_.stddev = {0.3f};
    graph_ = *models::BuildModel("mlp", data_.shape, 10);
    params_.resize(graph_.num_parameters());
    models::InitParams(graph_, 1, params_.data());
  }
  std::unique_ptr<models::Network> CpuNetwork() const {
    absl::StatusOr<std::unique_ptr<models::Network>> net =
        models::CreateNetwork(graph_, models::BackendOptions{});
    CHECK(net.ok()) << net.status();
    return *std::move(net);
  }
  // One step of a fresh workload over `net` (fp16 gradients asked for or not); `check` sees it
  // while the workload lives.
  template <typename Check>
  void OneStep(models::Network* net, bool fp16, Check check) {
    models::Batcher batcher(&data_, {0, 1, 1, /*shuffle=*/false, false});
    ModelWorkload workload(Options(fp16), net, &batcher, nullptr);
    workload.StartEpoch(0, 1);
    absl::StatusOr<ComputedStep> step = workload.ComputeGradient(0, 4, params_.data());
    ASSERT_TRUE(step.ok()) << step.status();
    check(*step);
  }
  ModelWorkloadOptions Options(bool fp16) const {
    ModelWorkloadOptions o;
    o.largest_batch = 4;
    o.fp16_gradients = fp16;
    return o;
  }

  models::Dataset data_;
  models::Graph graph_;
  std::vector<float> params_;
};

TEST_F(ModelWorkloadTest, TheCpuBackendGivesFp32EvenWhenFp16IsAsked) {
  std::unique_ptr<models::Network> net = CpuNetwork();
  OneStep(net.get(), /*fp16=*/true, [](const ComputedStep& step) {
    EXPECT_NE(step.grads.fp32, nullptr);
    EXPECT_EQ(step.grads.fp16, nullptr);
  });
}

TEST_F(ModelWorkloadTest, ABackendThatEncodesHandsOverTheFp16GradientPinned) {
  // The fp32 gradient of the same batch at the same parameters.
  std::vector<float> fp32(graph_.num_parameters());
  std::unique_ptr<models::Network> cpu = CpuNetwork();
  OneStep(cpu.get(), /*fp16=*/false, [&](const ComputedStep& step) {
    ASSERT_NE(step.grads.fp32, nullptr);
    std::memcpy(fp32.data(), step.grads.fp32, fp32.size() * sizeof(float));
  });
  std::vector<uint16_t> expected(fp32.size());
  codec::EncodeFp16(fp32.data(), fp32.size(), expected.data());

  EncodingNetwork net(CpuNetwork());
  {
    models::Batcher batcher(&data_, {0, 1, 1, /*shuffle=*/false, false});
    ModelWorkload workload(Options(/*fp16=*/true), &net, &batcher, nullptr);
    EXPECT_TRUE(net.writing_fp16());
    std::vector<HostGradient> ready;
    int64_t reported = 0;
    workload.set_gradient_ready([&](HostGradient g, int64_t, int64_t count) {
      ready.push_back(g);
      reported += count;
    });
    workload.StartEpoch(0, 1);
    absl::StatusOr<ComputedStep> step = workload.ComputeGradient(0, 4, params_.data());
    ASSERT_TRUE(step.ok()) << step.status();
    ASSERT_EQ(step->grads.fp32, nullptr);
    ASSERT_NE(step->grads.fp16, nullptr);
    EXPECT_EQ(std::vector<uint16_t>(step->grads.fp16, step->grads.fp16 + expected.size()),
              expected);
    EXPECT_EQ(reported, graph_.num_parameters());
    for (const HostGradient& g : ready) EXPECT_EQ(g, step->grads);
    // What the device copies into is the fp16 array, whole.
    ASSERT_EQ(net.pinned_.size(), 1u);
    EXPECT_EQ(net.pinned_[0].first, static_cast<const void*>(step->grads.fp16));
    EXPECT_EQ(net.pinned_[0].second, expected.size() * sizeof(uint16_t));
  }
  EXPECT_FALSE(net.writing_fp16());  // the array it wrote to is gone
}

// An evaluation counts as progress batch by batch (the worker's heartbeats carry it), so a long
// one is not a hang to the scheduler: 8 test samples at 3 a batch are 3 batches.
TEST_F(ModelWorkloadTest, EvaluationReportsProgressAfterEachBatch) {
  const std::unique_ptr<models::Network> net = CpuNetwork();
  models::Batcher batcher(&data_, {0, 1, 1, /*shuffle=*/false, false});
  ModelWorkloadOptions options = Options(false);
  options.eval_batch = 3;
  options.evaluates = [] { return true; };
  int batches = 0;
  options.evaluation_progress = [&batches] { ++batches; };
  ModelWorkload workload(options, net.get(), &batcher, &data_);
  const absl::StatusOr<std::optional<TestEvaluation>> evaluated =
      workload.EvaluateTest(params_.data());
  ASSERT_TRUE(evaluated.ok()) << evaluated.status();
  ASSERT_TRUE(evaluated->has_value());
  EXPECT_EQ(batches, 3);
  const absl::StatusOr<models::EvalResult> whole =
      EvaluateDataset(net.get(), data_, params_.data(), 8);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ((*evaluated)->accuracy, whole->correct / 8.0);
}

}  // namespace
}  // namespace r2sp
