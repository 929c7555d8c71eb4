// The worker's OPTIMIZER_STATE client against a real ServerHandler over the in-process
// network (a 10-float model in partitions of 4, 3 and 3): an initial state sent in place of
// INIT comes back whole (moments, updates, steps) and the weights are the ones sent; states
// with moments of another size or counters out of range are refused before anything is sent;
// replies that are not one PartitionCheckpoint of the partition's size are errors.
#include "worker/optimizer_state.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "proto/checkpoint.pb.h"
#include "tests/worker/one_server.h"

namespace r2sp {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(10);

// Answers every request at once with `reply` (a copy of its header and payload).
class CannedRequester : public Requester {
 public:
  explicit CannedRequester(std::string payload) : payload_(std::move(payload)) {}
  const std::string& RoutingId() const override { return id_; }
  void Request(const std::string&, Message request, absl::Duration,
               ReplyCallback callback) override {
    Message reply;
    reply.header.set_type(request.header.type());
    reply.header.set_is_reply(true);
    reply.payload.emplace_back(payload_.data(), payload_.size());
    callback(std::move(reply));
  }

 private:
  std::string id_ = "worker0";
  std::string payload_;
};

std::vector<float> Iota(float from) {
  std::vector<float> v(10);
  for (int i = 0; i < 10; ++i) v[i] = from + static_cast<float>(i);
  return v;
}

TEST(OptimizerStateTest, AnInitialStateComesBackWhole) {
  testing::OneServer job(proto::BSP, 0.5f);
  Requester* requester = job.network().Client("worker0");
  ScriptOptimizerState sent;
  sent.first = Iota(100);
  sent.second = Iota(200);
  sent.updates = 3;
  sent.steps = 5;
  const std::vector<float> params = Iota(0);
  ASSERT_TRUE(PushInitialState(*requester, job.ps(), 0, params.data(), sent, kTimeout).ok());
  EXPECT_EQ(job.Weights(), params);
  const proto::ShardCheckpoint shard = job.server().Snapshot();
  EXPECT_EQ(shard.partitions(1).clock(), 5);  // the bsp clock is the step
  EXPECT_EQ(shard.partitions(1).version(), 5);
  const absl::StatusOr<ScriptOptimizerState> pulled =
      PullOptimizerState(*requester, job.ps(), 0, kTimeout);
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(pulled->first, sent.first);
  EXPECT_EQ(pulled->second, sent.second);
  EXPECT_EQ(pulled->updates, 3);
  EXPECT_EQ(pulled->steps, 5.0);
}

TEST(OptimizerStateTest, BadStatesAreRefusedBeforeAnythingIsSent) {
  testing::OneServer job(proto::BSP, 0.5f);
  Requester* requester = job.network().Client("worker0");
  const std::vector<float> params = Iota(0);
  ScriptOptimizerState state;
  state.first = std::vector<float>(9);
  EXPECT_EQ(PushInitialState(*requester, job.ps(), 0, params.data(), state, kTimeout),
            absl::InvalidArgumentError("an optimizer state's moments hold 9 and 0 values; "
                                       "the model has 10"));
  state.first.clear();
  state.updates = 4;
  state.steps = 3;
  EXPECT_EQ(PushInitialState(*requester, job.ps(), 0, params.data(), state, kTimeout),
            absl::InvalidArgumentError("an optimizer state's counters are out of range: 4 "
                                       "updates in 3 steps"));
  EXPECT_EQ(PullOptimizerState(*requester, job.ps(), 0, kTimeout).status(),
            absl::FailedPreconditionError("partition 0 has no initial value yet"));
}

TEST(OptimizerStateTest, MalformedRepliesAreErrors) {
  testing::OneServer job(proto::BSP, 0.5f);
  CannedRequester garbage("\xff\xff\xff");
  EXPECT_EQ(PullOptimizerState(garbage, job.ps(), 0, kTimeout).status(),
            absl::InternalError("server 0 answered partition 0's state with something other "
                                "than one PartitionCheckpoint"));
  proto::PartitionCheckpoint short_moment;
  short_moment.set_momentum(std::string(3 * sizeof(float), '\0'));
  CannedRequester wrong_size(short_moment.SerializeAsString());
  EXPECT_EQ(PullOptimizerState(wrong_size, job.ps(), 0, kTimeout).status(),
            absl::InternalError("partition 0's state holds 12 bytes of a moment, not 16"));
}

}  // namespace
}  // namespace r2sp
