// fp16-delta pulls on the server: a worker's first pull, and any whose base the server does not
// hold, gets the whole weights (the same frame) and starts a copy; later ones get binary16
// deltas that rebuild the server's copy bit for bit on the worker; workers are independent;
// deltas binary16 cannot hold fall back to the whole weights.
#include "server/pull_shadows.h"

#include <cstring>
#include <vector>

#include "common/codec/fp16_delta.h"
#include "gtest/gtest.h"

namespace r2sp {
namespace {

zmq::message_t Frame(const std::vector<float>& v) {
  return zmq::message_t(v.data(), v.size() * sizeof(float));
}

std::vector<float> Floats(const zmq::message_t& frame) {
  std::vector<float> v(frame.size() / sizeof(float));
  std::memcpy(v.data(), frame.data(), frame.size());
  return v;
}

// What a worker does with a reply to its copy.
void Apply(const PullShadows::Reply& reply, std::vector<float>* copy) {
  if (reply.codec == proto::FP32) {
    *copy = Floats(reply.frame);
  } else {
    ASSERT_EQ(reply.codec, proto::FP16_DELTA);
    ASSERT_EQ(reply.frame.size(), copy->size() * sizeof(uint16_t));
    codec::AddFp16Deltas(static_cast<const uint16_t*>(reply.frame.data()), copy->size(),
                         copy->data());
  }
}

TEST(PullShadowsTest, FirstPullIsWholeThenDeltasRebuildTheWeights) {
  PullShadows shadows(3, 2);
  EXPECT_EQ(shadows.bytes(), 0u);
  std::vector<float> weights = {1.0f, -2.0f, 0.5f}, copy;
  PullShadows::Reply r = shadows.Answer(0, 0, Frame(weights));
  EXPECT_EQ(r.codec, proto::FP32);
  EXPECT_EQ(r.seq, 1u);
  Apply(r, &copy);
  EXPECT_EQ(copy, weights);
  EXPECT_EQ(shadows.bytes(), 3 * sizeof(float));

  uint64_t seq = r.seq;
  for (int step = 1; step <= 5; ++step) {
    for (float& w : weights) w -= 0.001f * step;
    r = shadows.Answer(0, seq, Frame(weights));
    EXPECT_EQ(r.codec, proto::FP16_DELTA);
    EXPECT_EQ(r.seq, seq + 1);
    seq = r.seq;
    Apply(r, &copy);
    // Within binary16's rounding (2^-11) of the latest change plus what earlier ones dropped.
    for (size_t i = 0; i < weights.size(); ++i) EXPECT_NEAR(copy[i], weights[i], 4e-6f) << i;
  }
}

TEST(PullShadowsTest, AStaleOrUnknownBaseGetsTheWholeWeightsAgain) {
  PullShadows shadows(2, 2);
  const std::vector<float> weights = {3.0f, 4.0f};
  const uint64_t first = shadows.Answer(1, 0, Frame(weights)).seq;
  const uint64_t second = shadows.Answer(1, first, Frame(weights)).seq;  // a delta
  // A reply the worker never applied: it asks from `first` again.
  PullShadows::Reply r = shadows.Answer(1, first, Frame(weights));
  EXPECT_EQ(r.codec, proto::FP32);
  EXPECT_GT(r.seq, second);
  EXPECT_EQ(Floats(r.frame), weights);
  EXPECT_EQ(shadows.Answer(1, r.seq + 7, Frame(weights)).codec, proto::FP32);  // never given
  // Worker 0 has no copy yet, whatever base it names.
  EXPECT_EQ(shadows.Answer(0, 1, Frame(weights)).codec, proto::FP32);
  EXPECT_EQ(shadows.bytes(), 2 * 2 * sizeof(float));
}

TEST(PullShadowsTest, WorkersKeepTheirOwnCopies) {
  PullShadows shadows(1, 2);
  std::vector<float> copy0, copy1;
  PullShadows::Reply a = shadows.Answer(0, 0, Frame({1.0f}));
  Apply(a, &copy0);
  PullShadows::Reply b = shadows.Answer(1, 0, Frame({2.0f}));
  Apply(b, &copy1);
  a = shadows.Answer(0, a.seq, Frame({1.5f}));
  Apply(a, &copy0);
  b = shadows.Answer(1, b.seq, Frame({2.5f}));
  Apply(b, &copy1);
  EXPECT_EQ(a.codec, proto::FP16_DELTA);
  EXPECT_EQ(b.codec, proto::FP16_DELTA);
  EXPECT_EQ(copy0, std::vector<float>{1.5f});
  EXPECT_EQ(copy1, std::vector<float>{2.5f});
}

TEST(PullShadowsTest, ADeltaBinary16CannotHoldSendsTheWholeWeights) {
  PullShadows shadows(2, 1);
  const uint64_t seq = shadows.Answer(0, 0, Frame({0.0f, 0.0f})).seq;
  const std::vector<float> jumped = {1.0f, 1e6f};
  PullShadows::Reply r = shadows.Answer(0, seq, Frame(jumped));
  EXPECT_EQ(r.codec, proto::FP32);
  EXPECT_EQ(Floats(r.frame), jumped);
  // The copy restarted from the whole weights: the next pull is a delta from them.
  r = shadows.Answer(0, r.seq, Frame({1.0f, 1e6f + 64.0f}));
  ASSERT_EQ(r.codec, proto::FP16_DELTA);
  std::vector<float> copy = jumped;
  Apply(r, &copy);
  EXPECT_EQ(copy, (std::vector<float>{1.0f, 1e6f + 64.0f}));
}

}  // namespace
}  // namespace r2sp
