// PartitionState with a RangePool: dense updates (with and without the kept step) and
// predicted weights equal those of one pass bit for bit, for a partition that is not a whole
// number of the pool's pieces; a small partition runs whole. Elastic averaging's Add is a plain
// add (momentum untouched, version + 1), copy-on-write under a pull frame still being sent, and
// the same on the pool's threads.
#include "server/partition_state.h"

#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "server/sgd.h"

namespace r2sp {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

std::vector<float> FrameValues(const zmq::message_t& frame) {
  std::vector<float> v(frame.size() / sizeof(float));
  std::memcpy(v.data(), frame.data(), frame.size());
  return v;
}

bool SameBits(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

TEST(PartitionStateTest, PoolGivesTheSameUpdatesAndPredictionsBitForBit) {
  for (size_t n : {size_t{1000}, size_t{300007}}) {
    RangePool pool(3);
    PartitionState alone(n), shared(n);
    shared.set_pool(&pool);
    const std::vector<float> init = Random(n, 1);
    ASSERT_TRUE(alone.Init(init.data()));
    ASSERT_TRUE(shared.Init(init.data()));
    SgdOptions options;
    options.learning_rate = 0.05f;
    options.momentum = 0.9f;
    options.weight_decay = 1e-4f;
    const Prediction p = PredictionFor(options, 0.25f, 3);
    for (int step = 0; step < 4; ++step) {
      const std::vector<float> grad = Random(n, 10 + step);
      alone.Apply(options, 0.25f, grad.data());
      shared.Apply(options, 0.25f, grad.data());
      ASSERT_TRUE(SameBits(alone.weights(), shared.weights(), n)) << n << " step " << step;
      ASSERT_TRUE(SameBits(alone.momentum(), shared.momentum(), n)) << n << " step " << step;
      // From the first prediction on, updates keep their step too.
      const std::vector<float> want = FrameValues(alone.PredictedPullFrame(p));
      const std::vector<float> got = FrameValues(shared.PredictedPullFrame(p));
      ASSERT_EQ(want.size(), n);
      ASSERT_TRUE(SameBits(want.data(), got.data(), n)) << n << " step " << step;
    }
    EXPECT_EQ(alone.version(), shared.version());
  }
}

// ApplyForeseeing leaves the state Apply leaves, and the pull of the prediction it foresaw gets
// the weights a separate pass would compute, bit for bit, without one: every such pull of that
// version shares one buffer. A pull asking for another prediction gets its own, and does not
// overwrite the foreseen one; the next update, or a restore, retires it.
TEST(PartitionStateTest, ForeseenPredictionIsServedAsComputedAndKept) {
  const size_t n = 1000;
  PartitionState plain(n), fused(n);
  const std::vector<float> init = Random(n, 1);
  ASSERT_TRUE(plain.Init(init.data()));
  ASSERT_TRUE(fused.Init(init.data()));
  const SgdOptions options{0.05f, 0.9f, 1e-4f};
  const Prediction p = PredictionFor(options, 0.25f, 3);
  const Prediction other = PredictionFor(options, 0.5f, 1);
  // Neither keeps the step term before the first prediction: ApplyForeseeing is Apply then.
  const std::vector<float> g0 = Random(n, 2);
  plain.Apply(options, 0.25f, g0.data());
  fused.ApplyForeseeing(options, 0.25f, g0.data(), p);
  ASSERT_TRUE(SameBits(plain.weights(), fused.weights(), n));
  ASSERT_TRUE(SameBits(FrameValues(plain.PredictedPullFrame(p)).data(),
                       FrameValues(fused.PredictedPullFrame(p)).data(), n));
  for (int step = 0; step < 3; ++step) {
    const std::vector<float> g = Random(n, 10 + step);
    plain.Apply(options, 0.25f, g.data());
    fused.ApplyForeseeing(options, 0.25f, g.data(), p);
    ASSERT_TRUE(SameBits(plain.weights(), fused.weights(), n)) << step;
    ASSERT_TRUE(SameBits(plain.momentum(), fused.momentum(), n)) << step;
    const zmq::message_t other_frame = fused.PredictedPullFrame(other);  // computed
    const zmq::message_t first = fused.PredictedPullFrame(p);            // foreseen
    const zmq::message_t second = fused.PredictedPullFrame(p);
    EXPECT_EQ(first.data(), second.data()) << step;
    EXPECT_NE(first.data(), other_frame.data()) << step;
    EXPECT_TRUE(SameBits(FrameValues(plain.PredictedPullFrame(p)).data(),
                         FrameValues(first).data(), n)) << step;
    EXPECT_TRUE(SameBits(FrameValues(plain.PredictedPullFrame(other)).data(),
                         FrameValues(other_frame).data(), n)) << step;
  }
  // Restored to another state at the foreseen version: the foreseen weights are not served.
  const std::vector<float> zeros(n, 0.0f);
  const int64_t version = fused.version();
  fused.Restore(zeros.data(), zeros.data(), nullptr, version, version);
  EXPECT_EQ(FrameValues(fused.PredictedPullFrame(p)), zeros);
}

TEST(PartitionStateTest, AddIsAPlainAddThatPullsInFlightDoNotSee) {
  PartitionState state(3);
  const float initial[] = {1, 2, 3};
  ASSERT_TRUE(state.Init(initial));
  const zmq::message_t in_flight = state.PullFrame();  // still being sent
  const float delta[] = {0.5f, -2, 0.25f};
  state.Add(delta);
  EXPECT_EQ(FrameValues(in_flight), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(FrameValues(state.PullFrame()), (std::vector<float>{1.5f, 0, 3.25f}));
  EXPECT_EQ(state.version(), 1);
  EXPECT_EQ(std::vector<float>(state.momentum(), state.momentum() + 3),
            (std::vector<float>{0, 0, 0}));
}

// Sparse deltas (elastic averaging's top-k and csc differences) add where they have values.
TEST(PartitionStateTest, SparseAddAddsAtTheIdsAndPullsInFlightDoNotSeeIt) {
  PartitionState state(5);
  const float initial[] = {1, 2, 3, 4, 5};
  ASSERT_TRUE(state.Init(initial));
  const zmq::message_t in_flight = state.PullFrame();
  const uint32_t ids[] = {1, 4};
  const float values[] = {0.5f, -5};
  wire::GradientView sparse;
  sparse.kind = wire::GradientView::Kind::kSparse;
  sparse.num_elements = 5;
  sparse.ids = ids;
  sparse.values = values;
  sparse.count = 2;
  state.Add(sparse);
  EXPECT_EQ(FrameValues(in_flight), (std::vector<float>{1, 2, 3, 4, 5}));
  EXPECT_EQ(FrameValues(state.PullFrame()), (std::vector<float>{1, 2.5f, 3, 4, 0}));
  const uint32_t chunk[] = {1};  // chunks of 2: elements 2 and 3
  const float chunk_values[] = {0.25f, -1};
  wire::GradientView chunks = sparse;
  chunks.kind = wire::GradientView::Kind::kChunks;
  chunks.ids = chunk;
  chunks.values = chunk_values;
  chunks.count = 1;
  chunks.chunk_elements = 2;
  state.Add(chunks);
  EXPECT_EQ(FrameValues(state.PullFrame()), (std::vector<float>{1, 2.5f, 3.25f, 3, 0}));
  EXPECT_EQ(state.version(), 2);
}

TEST(PartitionStateTest, PoolGivesTheSameAddBitForBit) {
  RangePool pool(3);
  const size_t n = 3 * 32768 + 5;
  const std::vector<float> initial = Random(n, 1), delta = Random(n, 2);
  PartitionState alone(n), shared(n);
  shared.set_pool(&pool);
  ASSERT_TRUE(alone.Init(initial.data()));
  ASSERT_TRUE(shared.Init(initial.data()));
  alone.Add(delta.data());
  shared.Add(delta.data());
  ASSERT_TRUE(SameBits(alone.weights(), shared.weights(), n));
  EXPECT_EQ(alone.weights()[n - 1], initial[n - 1] + delta[n - 1]);
}

}  // namespace
}  // namespace r2sp
