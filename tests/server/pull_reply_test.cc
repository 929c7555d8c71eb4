// PullReplier (server/pull_reply.h): the reply to a pull of each kind, decoded as the worker
// decodes it: current weights in fp32 and fp16, predicted weights (the fraction split over the
// updates, or whole steps; the scheduled learning rate) in fp32 and fp16, and FP16_DELTA
// pulls (the whole weights first, then deltas to the worker's copy); the header's version,
// wait, steps and restored steps.
#include "server/pull_reply.h"

#include <vector>

#include "common/wire/pull_frames.h"
#include "gtest/gtest.h"

namespace r2sp {
namespace {

class PullReplyTest : public ::testing::Test {
 protected:
  PullReplyTest() : held_(4, 2) {
    const std::vector<float> ones(4, 1.0f);
    held_.state.Init(ones.data());
  }

  // Builds the reply to `pull` and decodes it as the worker would, into data_.
  absl::StatusOr<wire::PulledPartition> Answer(const PullReplier& replier,
                                               const wire::PullRequest& pull, uint64_t base = 0) {
    Message reply = replier.Build(held_, pull, 0.0, 2);
    last_codec_ = reply.header.codec();
    wire::PullAsked asked;
    asked.key = pull.key;
    asked.num_elements = 4;
    asked.codec = pull.codec;
    asked.delta_base = base;
    return wire::DecodePullReply(reply, asked, data_.data());
  }
  // One update with gradient {1, 2, 3, 4} at rate 0.5, no momentum: the weights go from 1 to
  // {0.5, 0, -0.5, -1}, and (once a prediction asked for it) the update's term is the gradient.
  void Update() {
    const std::vector<float> grad = {1, 2, 3, 4};
    held_.state.Apply(SgdOptions{0.5f, 0.0f, 0.0f}, 1.0f, grad.data());
  }

  HeldPartition held_;
  std::vector<float> data_ = std::vector<float>(4, 0.0f);
  proto::Codec last_codec_ = proto::FP32;
  const SgdOptions sgd_{0.5f, 0.0f, 0.0f};
};

TEST_F(PullReplyTest, CurrentWeightsWithTheHeadersCounters) {
  const PullReplier replier(sgd_, LrSchedule{}, true);
  held_.steps = 2.5;
  held_.restored_steps = 1;
  Update();
  wire::PullRequest pull;
  Message reply = replier.Build(held_, pull, 0.75, 2);
  EXPECT_EQ(reply.header.clock(), 1);  // one update (an initial value is version 0)
  EXPECT_EQ(reply.header.codec(), proto::FP32);
  EXPECT_EQ(reply.header.pull_reply().waited_seconds(), 0.75);
  EXPECT_EQ(reply.header.pull_reply().steps(), 2.5);
  EXPECT_EQ(reply.header.pull_reply().restored_steps(), 1);
  EXPECT_EQ(reply.header.pull_reply().delta_seq(), 0u);
  ASSERT_EQ(reply.payload.size(), 1u);
  EXPECT_EQ(reply.payload[0].data(), held_.state.weights());  // the buffer itself, no copy

  pull.codec = proto::FP16;
  ASSERT_TRUE(Answer(replier, pull).ok());
  EXPECT_EQ(last_codec_, proto::FP16);
  EXPECT_EQ(data_, (std::vector<float>{0.5f, 0, -0.5f, -1}));
}

TEST_F(PullReplyTest, PredictedWeightsSplitTheFractionOverTheUpdates) {
  const PullReplier replier(sgd_, LrSchedule{}, true);
  wire::PullRequest pull;
  pull.predict_fraction = 0.5f;
  pull.predict_updates = 2;
  // No update's term kept yet: the prediction is the weights.
  ASSERT_TRUE(Answer(replier, pull).ok());
  EXPECT_EQ(data_, (std::vector<float>{1, 1, 1, 1}));
  Update();
  // Two updates of 0.25 each at rate 0.5: x = w - 0.25 * g.
  ASSERT_TRUE(Answer(replier, pull).ok());
  EXPECT_EQ(data_, (std::vector<float>{0.25f, -0.5f, -1.25f, -2}));
  pull.codec = proto::FP16;  // the same, rounded (exactly) to binary16 for this pull alone
  ASSERT_TRUE(Answer(replier, pull).ok());
  EXPECT_EQ(last_codec_, proto::FP16);
  EXPECT_EQ(data_, (std::vector<float>{0.25f, -0.5f, -1.25f, -2}));
}

TEST_F(PullReplyTest, PredictedWholeStepsAndTheScheduledRate) {
  const PullReplier whole(sgd_, LrSchedule{}, /*per_sample_updates=*/false);
  wire::PullRequest pull;
  pull.predict_fraction = 0.5f;
  pull.predict_updates = 2;
  ASSERT_TRUE(Answer(whole, pull).ok());
  Update();
  // Two whole steps at rate 0.5: x = w - 1 * g.
  ASSERT_TRUE(Answer(whole, pull).ok());
  EXPECT_EQ(data_, (std::vector<float>{-0.5f, -2, -3.5f, -5}));

  LrSchedule schedule;
  schedule.milestones = {1};
  schedule.gamma = 0.5f;
  const PullReplier scheduled(sgd_, schedule, true);
  held_.steps = 1;  // past the milestone: rate 0.25, x = w - 0.125 * g
  ASSERT_TRUE(Answer(scheduled, pull).ok());
  EXPECT_EQ(data_, (std::vector<float>{0.375f, -0.25f, -0.875f, -1.5f}));
}

TEST_F(PullReplyTest, DeltaPullsSendTheWholeWeightsThenDeltas) {
  const PullReplier replier(sgd_, LrSchedule{}, true);
  wire::PullRequest pull;
  pull.rank = 1;
  pull.codec = proto::FP16_DELTA;
  absl::StatusOr<wire::PulledPartition> first = Answer(replier, pull);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(last_codec_, proto::FP32);  // no copy yet: the whole weights
  EXPECT_EQ(data_, (std::vector<float>{1, 1, 1, 1}));
  ASSERT_NE(held_.shadows, nullptr);
  EXPECT_EQ(held_.shadows->bytes(), 4 * sizeof(float));
  Update();
  pull.delta_base = first->delta_seq;
  absl::StatusOr<wire::PulledPartition> next = Answer(replier, pull, first->delta_seq);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(last_codec_, proto::FP16_DELTA);
  EXPECT_EQ(next->delta_seq, first->delta_seq + 1);
  EXPECT_EQ(next->bytes, 4 * sizeof(uint16_t));
  EXPECT_EQ(data_, (std::vector<float>{0.5f, 0, -0.5f, -1}));
}

}  // namespace
}  // namespace r2sp
