// Tests of WaitingRegisters: parking, a repeat over the same connection answered at its newest
// request, a repeat over another refused, and the order kept when some are put back.
#include "scheduler/waiting_registers.h"

#include "gtest/gtest.h"
#include "tests/testing/fakes.h"

namespace r2sp {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(50);

proto::RegisterRequest Reg(const std::string& instance, const std::string& endpoint) {
  proto::RegisterRequest reg;
  reg.set_role(proto::WORKER);
  reg.set_instance_id(instance);
  reg.set_endpoint(endpoint);
  return reg;
}

Responder Over(testing::RecordingSink& sink, const std::string& routing_id, uint64_t id) {
  proto::Header header;
  header.set_type(proto::REGISTER);
  header.set_request_id(id);
  return Responder(&sink, routing_id, header);
}

TEST(WaitingRegistersTest, ARepeatOverTheSameConnectionIsAnsweredAtItsNewestRequest) {
  testing::RecordingSink sink;
  WaitingRegisters waiting;
  Responder first = Over(sink, "a", 1);
  ASSERT_TRUE(waiting.Park(Reg("i", "tcp://a:1"), first, kT0).ok());
  Responder again = Over(sink, "a", 2);
  ASSERT_TRUE(waiting.Park(Reg("i", "tcp://a:2"), again, kT0 + absl::Seconds(5)).ok());
  ASSERT_EQ(waiting.size(), 1u);
  EXPECT_EQ(waiting.held()[0].since, kT0);  // keeps its place and time
  EXPECT_EQ(waiting.held()[0].request.endpoint(), "tcp://a:2");
  waiting.AnswerAll(absl::FailedPreconditionError("too late"));
  auto replies = sink.Take();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].second.header.request_id(), 2u);
  EXPECT_EQ(replies[0].second.header.code(), proto::FAILED_PRECONDITION);
  EXPECT_EQ(replies[0].second.header.error(), "too late");
  EXPECT_EQ(waiting.size(), 0u);
}

TEST(WaitingRegistersTest, ARepeatOverAnotherConnectionIsRefused) {
  testing::RecordingSink sink;
  WaitingRegisters waiting;
  Responder first = Over(sink, "a", 1);
  ASSERT_TRUE(waiting.Park(Reg("i", "tcp://a"), first, kT0).ok());
  Responder thief = Over(sink, "b", 2);
  EXPECT_EQ(
      waiting.Park(Reg("i", "tcp://b"), thief, kT0),
      absl::PermissionDeniedError("REGISTER repeated an instance id over another connection"));
  ASSERT_EQ(waiting.size(), 1u);
  EXPECT_EQ(waiting.held()[0].responder.routing_id(), "a");
  EXPECT_TRUE(sink.Take().empty());
}

TEST(WaitingRegistersTest, PutBackKeepsTheStillWaitingAheadOfNewcomers) {
  testing::RecordingSink sink;
  WaitingRegisters waiting;
  for (const char* id : {"x", "y"}) {
    Responder r = Over(sink, id, 1);
    ASSERT_TRUE(waiting.Park(Reg(id, "tcp://h"), r, kT0).ok());
  }
  std::vector<WaitingRegister> all = waiting.TakeAll();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(waiting.size(), 0u);
  Responder z = Over(sink, "z", 1);
  ASSERT_TRUE(waiting.Park(Reg("z", "tcp://h"), z, kT0).ok());
  std::vector<WaitingRegister> still;
  still.push_back(std::move(all[1]));
  waiting.PutBack(std::move(still));
  ASSERT_EQ(waiting.size(), 2u);
  EXPECT_EQ(waiting.held()[0].request.instance_id(), "y");
  EXPECT_EQ(waiting.held()[1].request.instance_id(), "z");
  EXPECT_EQ(waiting.TakeLast().request.instance_id(), "z");
  ASSERT_EQ(waiting.size(), 1u);
  EXPECT_EQ(waiting.held()[0].request.instance_id(), "y");
}

}  // namespace
}  // namespace r2sp
