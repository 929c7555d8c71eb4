// Tests of the scheduler's Rendezvous: complete once every node registered, the model the
// first worker describes, and the refusals with their words (no model, another model, one too
// many, a repeat over another connection).
#include "scheduler/rendezvous.h"

#include "gtest/gtest.h"
#include "tests/testing/fakes.h"

namespace r2sp {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(10);

proto::RegisterRequest Reg(proto::Role role, const std::string& instance, int64_t elements) {
  proto::RegisterRequest reg;
  reg.set_role(role);
  reg.set_instance_id(instance);
  reg.set_endpoint("tcp://" + instance);
  if (role == proto::WORKER && elements > 0) {
    proto::TensorSpec* t = reg.add_model();
    t->set_name("w");
    t->set_num_elements(elements);
  }
  return reg;
}

class RendezvousTest : public ::testing::Test {
 protected:
  Responder Over(const std::string& routing_id) {
    return Responder(&sink_, routing_id, proto::Header());
  }
  absl::Status Register(const proto::RegisterRequest& reg, const std::string& routing_id) {
    Responder r = Over(routing_id);
    return rendezvous_.Register(reg, r, kT0);
  }
  testing::RecordingSink sink_;
  Rendezvous rendezvous_{/*num_servers=*/1, /*num_workers=*/2};
};

TEST_F(RendezvousTest, CompleteOnceEveryNodeRegisteredInArrivalOrder) {
  ASSERT_TRUE(Register(Reg(proto::WORKER, "w-a", 4), "a").ok());
  ASSERT_TRUE(Register(Reg(proto::SERVER, "s-b", 0), "b").ok());
  EXPECT_FALSE(rendezvous_.complete());
  ASSERT_TRUE(Register(Reg(proto::WORKER, "w-c", 4), "c").ok());
  EXPECT_TRUE(rendezvous_.complete());
  EXPECT_TRUE(sink_.Take().empty());  // held, not answered
  std::vector<WaitingRegister> all = rendezvous_.Take();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].request.instance_id(), "w-a");
  EXPECT_EQ(all[1].request.instance_id(), "s-b");
  EXPECT_EQ(all[2].responder.routing_id(), "c");
  ASSERT_EQ(rendezvous_.model().size(), 1u);
  EXPECT_EQ(rendezvous_.model()[0].num_elements(), 4);
}

TEST_F(RendezvousTest, WorkersMustDescribeTheFirstWorkersModel) {
  EXPECT_EQ(Register(Reg(proto::WORKER, "w-a", 0), "a"),
            absl::InvalidArgumentError("a worker must describe its model"));
  ASSERT_TRUE(Register(Reg(proto::WORKER, "w-a", 4), "a").ok());
  EXPECT_EQ(Register(Reg(proto::WORKER, "w-b", 5), "b"),
            absl::InvalidArgumentError(
                "this worker's model differs from the one the first worker registered"));
  EXPECT_TRUE(rendezvous_.SameModel(Reg(proto::WORKER, "x", 4).model()));
  EXPECT_FALSE(rendezvous_.SameModel(Reg(proto::WORKER, "x", 5).model()));
  EXPECT_FALSE(rendezvous_.SameModel(Reg(proto::WORKER, "x", 0).model()));
}

TEST_F(RendezvousTest, OneTooManyIsRefusedButARepeatIsNot) {
  ASSERT_TRUE(Register(Reg(proto::SERVER, "s-a", 0), "a").ok());
  Responder extra = Over("b");
  const absl::Status status = rendezvous_.Register(Reg(proto::SERVER, "s-b", 0), extra, kT0);
  EXPECT_EQ(status, absl::FailedPreconditionError(
                        "the job wants 1 servers and 2 workers; this one is one too many"));
  extra.ReplyStatus(status);  // the caller still holds the responder, to answer it
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].first, "b");
  EXPECT_EQ(replies[0].second.header.code(), proto::FAILED_PRECONDITION);
  EXPECT_TRUE(Register(Reg(proto::SERVER, "s-a", 0), "a").ok());  // a retry
  EXPECT_EQ(
      Register(Reg(proto::SERVER, "s-a", 0), "z"),
      absl::PermissionDeniedError("REGISTER repeated an instance id over another connection"));
  EXPECT_EQ(rendezvous_.Take().size(), 1u);
}

}  // namespace
}  // namespace r2sp
