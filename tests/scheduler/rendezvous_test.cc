// Tests of the scheduler's Rendezvous: complete once every node registered, the model the
// first worker describes, the ranks workers ask for, and the refusals with their words (no
// model, another model, one too many, a repeat over another connection, a rank out of range or
// asked for twice).
#include "scheduler/rendezvous.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/fakes.h"

namespace r2sp {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(10);

proto::RegisterRequest Reg(proto::Role role, const std::string& instance, int64_t elements,
                           std::optional<int> asked = std::nullopt) {
  proto::RegisterRequest reg;
  if (asked.has_value()) reg.set_requested_rank(*asked);
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

// (instance id, rank) of each registration TakeRanked returns, in its order.
std::vector<std::pair<std::string, int>> Ranks(std::vector<RankedRegister> ranked) {
  std::vector<std::pair<std::string, int>> ranks;
  for (const RankedRegister& r : ranked) ranks.emplace_back(r.held.request.instance_id(), r.rank);
  return ranks;
}

TEST_F(RendezvousTest, WorkersGetTheRanksTheyAskedForAndTheOthersTheRanksLeftInArrivalOrder) {
  Rendezvous rendezvous(/*num_servers=*/2, /*num_workers=*/4);
  auto add = [&](const proto::RegisterRequest& reg) {
    Responder r = Over(reg.instance_id());
    return rendezvous.Register(reg, r, kT0);
  };
  ASSERT_TRUE(add(Reg(proto::WORKER, "w-a", 4)).ok());
  ASSERT_TRUE(add(Reg(proto::WORKER, "w-b", 4, /*asked=*/2)).ok());
  ASSERT_TRUE(add(Reg(proto::SERVER, "s-c", 0)).ok());
  ASSERT_TRUE(add(Reg(proto::WORKER, "w-d", 4, /*asked=*/0)).ok());
  ASSERT_TRUE(add(Reg(proto::SERVER, "s-e", 0)).ok());
  ASSERT_TRUE(add(Reg(proto::WORKER, "w-f", 4)).ok());
  ASSERT_TRUE(rendezvous.complete());
  EXPECT_EQ(Ranks(rendezvous.TakeRanked()),
            (std::vector<std::pair<std::string, int>>{
                {"w-a", 1}, {"w-b", 2}, {"s-c", 0}, {"w-d", 0}, {"s-e", 1}, {"w-f", 3}}));
}

TEST_F(RendezvousTest, ARankOutOfRangeOrAskedForTwiceIsRefusedWithItsWords) {
  EXPECT_EQ(Register(Reg(proto::WORKER, "w-a", 4, /*asked=*/-1), "a"),
            absl::InvalidArgumentError(
                "this worker asks for rank -1, but the job has 2 workers (ranks 0 to 1)"));
  EXPECT_EQ(Register(Reg(proto::WORKER, "w-a", 4, /*asked=*/2), "a"),
            absl::InvalidArgumentError(
                "this worker asks for rank 2, but the job has 2 workers (ranks 0 to 1)"));
  EXPECT_EQ(Register(Reg(proto::WORKER, "w-a", 4, /*asked=*/-2147483648), "a"),
            absl::InvalidArgumentError("this worker asks for rank -2147483648, but the job has 2 "
                                       "workers (ranks 0 to 1)"));
  EXPECT_TRUE(rendezvous_.model().empty());  // a refused first worker set no model
  ASSERT_TRUE(Register(Reg(proto::WORKER, "w-a", 4, /*asked=*/1), "a").ok());
  EXPECT_EQ(Register(Reg(proto::WORKER, "w-b", 4, /*asked=*/1), "b"),
            absl::FailedPreconditionError("this worker asks for rank 1, which the worker "
                                          "registered from tcp://w-a asked for already"));
  EXPECT_TRUE(sink_.Take().empty());  // the caller answers the refused
  ASSERT_TRUE(Register(Reg(proto::SERVER, "s", 0), "s").ok());
  EXPECT_FALSE(rendezvous_.complete());  // the refused worker is not held
  ASSERT_TRUE(Register(Reg(proto::WORKER, "w-b", 4, /*asked=*/0), "b").ok());
  EXPECT_TRUE(rendezvous_.complete());
  EXPECT_EQ(Ranks(rendezvous_.TakeRanked()),
            (std::vector<std::pair<std::string, int>>{{"w-a", 1}, {"s", 0}, {"w-b", 0}}));
}

TEST_F(RendezvousTest, ARepeatedRegisterMayAskAgainOrForAnotherRank) {
  ASSERT_TRUE(Register(Reg(proto::WORKER, "w-a", 4, /*asked=*/1), "a").ok());
  ASSERT_TRUE(Register(Reg(proto::WORKER, "w-a", 4, /*asked=*/1), "a").ok());  // not a rival
  ASSERT_TRUE(Register(Reg(proto::WORKER, "w-a", 4, /*asked=*/0), "a").ok());  // replaces it
  ASSERT_TRUE(Register(Reg(proto::WORKER, "w-b", 4, /*asked=*/1), "b").ok());  // rank 1 is free
  EXPECT_EQ(
      Register(Reg(proto::WORKER, "w-b", 4, /*asked=*/1), "z"),
      absl::PermissionDeniedError("REGISTER repeated an instance id over another connection"));
  ASSERT_TRUE(Register(Reg(proto::SERVER, "s", 0), "s").ok());
  ASSERT_TRUE(rendezvous_.complete());
  EXPECT_EQ(Ranks(rendezvous_.TakeRanked()),
            (std::vector<std::pair<std::string, int>>{{"w-a", 0}, {"w-b", 1}, {"s", 0}}));
}

}  // namespace
}  // namespace r2sp
