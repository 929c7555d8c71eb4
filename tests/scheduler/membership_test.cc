// Tests of the scheduler's Membership: REGISTER's refusals with their words, the rendezvous
// answered all at once with ranks (those the workers asked for) and books, a worker joining the
// running job answered once the servers took it (at the next rank, whatever it asked), a server
// replacing a lost one, and a rendezvous that timed out.
#include "scheduler/membership.h"

#include <map>
#include <string>
#include <utility>

#include "common/book_frame.h"
#include "gtest/gtest.h"
#include "tests/testing/fakes.h"

namespace r2sp {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(70);

proto::Header Register(proto::Role role, const std::string& instance, int asked = -1) {
  proto::Header header;
  header.set_type(proto::REGISTER);
  proto::RegisterRequest* reg = header.mutable_register_request();
  reg->set_role(role);
  reg->set_instance_id(instance);
  reg->set_endpoint("tcp://" + instance);
  if (asked >= 0) reg->set_requested_rank(asked);
  if (role == proto::WORKER) {
    proto::TensorSpec* t = reg->add_model();
    t->set_name("w");
    t->set_num_elements(8);
  }
  return header;
}

class MembershipTest : public ::testing::Test {
 protected:
  explicit MembershipTest(int workers = 1)
      : membership_(Options(workers), &nodes_, &slots_, &barriers_, &requester_) {}
  static MembershipOptions Options(int workers) {
    MembershipOptions options;
    options.num_servers = 1;
    options.num_workers = workers;
    options.server_replace_timeout = absl::Seconds(20);
    options.book_settings.set_job_id("job");
    return options;
  }
  absl::Status Send(const proto::Header& header, const std::string& routing_id,
                    const std::string& failure = "", proto::Role key = proto::ROLE_UNSPECIFIED) {
    Responder r(&sink_, routing_id, header, key);
    return membership_.Register(header, r, kT0, /*ending=*/false, failure);
  }
  void Rendezvous() {
    ASSERT_TRUE(Send(Register(proto::SERVER, "s"), "s").ok());
    ASSERT_TRUE(Send(Register(proto::WORKER, "w"), "w").ok());
    ASSERT_EQ(sink_.Take().size(), 2u);
  }
  testing::RecordingSink sink_;
  testing::RecordingRequester requester_{"sched"};
  NodeTable nodes_;
  SlotCoordinator slots_{SlotCoordinatorOptions{}, /*r2sp=*/false};
  BarrierBook barriers_;
  Membership membership_;
};

TEST_F(MembershipTest, MalformedRegistrationsAreRefusedWithTheirWords) {
  proto::Header empty;
  empty.set_type(proto::REGISTER);
  EXPECT_EQ(Send(empty, "x"), absl::InvalidArgumentError("REGISTER without a register_request"));
  EXPECT_EQ(Send(Register(proto::SCHEDULER, "x"), "x"),
            absl::InvalidArgumentError("only servers and workers register"));
  EXPECT_EQ(Send(Register(proto::SERVER, "x"), "x", "", proto::WORKER),
            absl::PermissionDeniedError("a peer without a server's key tried to register as one"));
  proto::Header no_endpoint = Register(proto::SERVER, "x");
  no_endpoint.mutable_register_request()->clear_endpoint();
  EXPECT_EQ(Send(no_endpoint, "x"),
            absl::InvalidArgumentError("REGISTER needs endpoint and instance_id"));
  EXPECT_EQ(Send(Register(proto::SERVER, "x", /*asked=*/0), "x"),
            absl::InvalidArgumentError("only workers ask for a rank"));
  EXPECT_EQ(Send(Register(proto::WORKER, "x", /*asked=*/1), "x"),
            absl::InvalidArgumentError(
                "this worker asks for rank 1, but the job has 1 workers (ranks 0 to 0)"));
  EXPECT_TRUE(sink_.Take().empty());
}

TEST_F(MembershipTest, TheRendezvousAnswersEveryoneWithRankAndBook) {
  ASSERT_TRUE(Send(Register(proto::WORKER, "w"), "w").ok());
  EXPECT_FALSE(membership_.rendezvous_done());
  EXPECT_TRUE(sink_.Take().empty());
  ASSERT_TRUE(Send(Register(proto::SERVER, "s"), "s").ok());
  EXPECT_TRUE(membership_.rendezvous_done());
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[0].first, "w");
  const proto::RegisterReply w = RegisterReplyOf(replies[0].second).value();
  EXPECT_EQ(w.rank(), 0);
  EXPECT_EQ(w.data_shard(), 0);
  EXPECT_EQ(w.scheduler_id(), "sched");
  EXPECT_EQ(w.book().job_id(), "job");
  EXPECT_EQ(w.book().server_replace_ms(), 20000);
  EXPECT_EQ(w.book().workers(0).routing_id(), "");
  const proto::RegisterReply s = RegisterReplyOf(replies[1].second).value();
  EXPECT_EQ(s.data_shard(), -1);
  EXPECT_EQ(s.book().workers(0).routing_id(), "w");  // servers learn the workers' connections
  EXPECT_EQ(slots_.planner().ring().size(), 1u);
}

TEST_F(MembershipTest, AJoinerIsAnsweredOnceTheServersTookIt) {
  Rendezvous();
  proto::Header other_model = Register(proto::WORKER, "j");
  other_model.mutable_register_request()->mutable_model(0)->set_num_elements(9);
  EXPECT_EQ(Send(other_model, "j"),
            absl::InvalidArgumentError("this worker's model differs from the running job's"));
  ASSERT_TRUE(Send(Register(proto::WORKER, "j"), "j").ok());
  EXPECT_TRUE(membership_.joins().IsJoining(1));
  ASSERT_EQ(membership_.joins().TakeMemberships().size(), 1u);
  EXPECT_TRUE(sink_.Take().empty());
  Message ok;
  ok.header.set_code(proto::OK);
  membership_.ServerAnswered(1, std::move(ok), kT0 + absl::Seconds(2));
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].first, "j");
  const proto::RegisterReply j = RegisterReplyOf(replies[0].second).value();
  EXPECT_TRUE(j.joined_running_job());
  EXPECT_EQ(j.rank(), 1);
  EXPECT_EQ(j.book().workers_size(), 2);
  EXPECT_EQ(nodes_.workers()[1].last_seen, kT0 + absl::Seconds(2));
  EXPECT_EQ(slots_.planner().ring().size(), 2u);
}

TEST_F(MembershipTest, AJoinerTakesTheNextRankWhateverItAsks) {
  Rendezvous();
  ASSERT_TRUE(Send(Register(proto::WORKER, "j", /*asked=*/0), "j").ok());
  ASSERT_EQ(membership_.joins().TakeMemberships().size(), 1u);
  Message ok;
  ok.header.set_code(proto::OK);
  membership_.ServerAnswered(1, std::move(ok), kT0);
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(RegisterReplyOf(replies[0].second).value().rank(), 1);
  EXPECT_EQ(nodes_.workers()[0].instance_id, "w");
  EXPECT_EQ(nodes_.workers()[1].instance_id, "j");
}

// A job of three workers.
class ThreeWorkerMembershipTest : public MembershipTest {
 protected:
  ThreeWorkerMembershipTest() : MembershipTest(3) {}
};

TEST_F(ThreeWorkerMembershipTest, WorkersGetTheRanksTheyAskedForTheOthersTheRanksLeft) {
  ASSERT_TRUE(Send(Register(proto::WORKER, "a"), "a").ok());
  ASSERT_TRUE(Send(Register(proto::WORKER, "b", /*asked=*/0), "b").ok());
  ASSERT_TRUE(Send(Register(proto::SERVER, "s"), "s").ok());
  ASSERT_TRUE(Send(Register(proto::WORKER, "c", /*asked=*/2), "c").ok());
  ASSERT_TRUE(membership_.rendezvous_done());
  std::map<std::string, proto::RegisterReply> replies;
  for (auto& [routing_id, message] : sink_.Take()) {
    replies[routing_id] = RegisterReplyOf(message).value();
  }
  ASSERT_EQ(replies.size(), 4u);
  EXPECT_EQ(replies["a"].rank(), 1);
  EXPECT_EQ(replies["a"].data_shard(), 1);
  EXPECT_EQ(replies["b"].rank(), 0);
  EXPECT_EQ(replies["b"].data_shard(), 0);
  EXPECT_EQ(replies["c"].rank(), 2);
  EXPECT_EQ(replies["c"].data_shard(), 2);
  EXPECT_EQ(replies["s"].rank(), 0);
  // The table and every book list the workers by their ranks.
  ASSERT_EQ(nodes_.workers().size(), 3u);
  EXPECT_EQ(nodes_.workers()[0].instance_id, "b");
  EXPECT_EQ(nodes_.workers()[1].instance_id, "a");
  EXPECT_EQ(nodes_.workers()[2].instance_id, "c");
  for (const auto& [routing_id, reply] : replies) {
    ASSERT_EQ(reply.book().workers_size(), 3) << routing_id;
    EXPECT_EQ(reply.book().workers(0).endpoint(), "tcp://b") << routing_id;
    EXPECT_EQ(reply.book().workers(1).endpoint(), "tcp://a") << routing_id;
    EXPECT_EQ(reply.book().workers(2).endpoint(), "tcp://c") << routing_id;
  }
  EXPECT_EQ(replies["s"].book().workers(1).routing_id(), "a");
}

TEST_F(ThreeWorkerMembershipTest, ARankAskedForTwiceIsRefusedAndTheRendezvousGoesOn) {
  ASSERT_TRUE(Send(Register(proto::WORKER, "a", /*asked=*/1), "a").ok());
  EXPECT_EQ(Send(Register(proto::WORKER, "b", /*asked=*/1), "b"),
            absl::FailedPreconditionError("this worker asks for rank 1, which the worker "
                                          "registered from tcp://a asked for already"));
  EXPECT_EQ(Send(Register(proto::WORKER, "b", /*asked=*/3), "b"),
            absl::InvalidArgumentError(
                "this worker asks for rank 3, but the job has 3 workers (ranks 0 to 2)"));
  ASSERT_TRUE(Send(Register(proto::WORKER, "a", /*asked=*/1), "a").ok());  // a repeat
  ASSERT_TRUE(Send(Register(proto::WORKER, "b"), "b").ok());
  ASSERT_TRUE(Send(Register(proto::SERVER, "s"), "s").ok());
  EXPECT_FALSE(membership_.rendezvous_done());
  EXPECT_TRUE(sink_.Take().empty());
  ASSERT_TRUE(Send(Register(proto::WORKER, "c"), "c").ok());
  ASSERT_TRUE(membership_.rendezvous_done());
  std::map<std::string, int> ranks;
  for (auto& [routing_id, message] : sink_.Take()) {
    ranks[routing_id] = RegisterReplyOf(message).value().rank();
  }
  EXPECT_EQ(ranks, (std::map<std::string, int>{{"a", 1}, {"b", 0}, {"c", 2}, {"s", 0}}));
}

TEST_F(MembershipTest, AServerReplacesALostOne) {
  Rendezvous();
  EXPECT_EQ(Send(Register(proto::SERVER, "n"), "n", "it broke"),
            absl::FailedPreconditionError("the job failed: it broke"));
  nodes_.servers()[0].state = NodeState::kDead;
  ASSERT_TRUE(membership_.replacement().Lost(nodes_.servers()[0], "silent", kT0).ok());
  ASSERT_TRUE(Send(Register(proto::SERVER, "n"), "n").ok());
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 1u);
  const proto::RegisterReply r = RegisterReplyOf(replies[0].second).value();
  EXPECT_TRUE(r.joined_running_job());
  EXPECT_EQ(r.rank(), 0);
  EXPECT_EQ(r.book().servers(0).incarnation(), 1);
  EXPECT_EQ(r.book().workers(0).routing_id(), "w");
}

TEST_F(MembershipTest, ATimedOutRendezvousTellsTheWaiting) {
  ASSERT_TRUE(Send(Register(proto::WORKER, "w"), "w").ok());
  membership_.FailRendezvous("not every node registered within 2m");
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].second.header.code(), proto::FAILED_PRECONDITION);
  EXPECT_EQ(replies[0].second.header.error(), "not every node registered within 2m");
}

}  // namespace
}  // namespace r2sp
