// Tests of the scheduler's JoinCoordinator: an asp join told to every live server at once, a
// bsp join in two steps at the largest clock the servers answer, a cancelled join giving its
// shard back, joiners waiting for a free data shard, and its refusals.
#include "scheduler/join_coordinator.h"

#include "gtest/gtest.h"
#include "tests/testing/fakes.h"

namespace r2sp {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(500);

proto::RegisterRequest Joiner(const std::string& instance, bool wants_shard = false) {
  proto::RegisterRequest reg;
  reg.set_role(proto::WORKER);
  reg.set_instance_id(instance);
  reg.set_endpoint("tcp://" + instance);
  reg.set_wants_data_shard(wants_shard);
  return reg;
}

Message ClockReply(int64_t clock) {
  Message reply;
  reply.header.set_code(proto::OK);
  reply.header.set_clock(clock);
  return reply;
}

class JoinCoordinatorTest : public ::testing::Test {
 protected:
  explicit JoinCoordinatorTest(proto::SyncMode sync = proto::ASP)
      : joins_(JoinCoordinatorOptions{sync, /*num_workers=*/2, absl::Seconds(3)}, &nodes_) {
    nodes_.Add(proto::SERVER, "tcp://s0", "s0", "s0", kT0);
    nodes_.Add(proto::SERVER, "tcp://s1", "s1", "s1", kT0);
    nodes_.Add(proto::WORKER, "tcp://w0", "w0", "w0", kT0);
  }
  absl::Status Join(const proto::RegisterRequest& reg, absl::Time now = kT0) {
    Responder r(&sink_, reg.instance_id(), proto::Header());
    return joins_.Join(reg, r, now);
  }
  testing::RecordingSink sink_;
  NodeTable nodes_;
  JoinCoordinator joins_;
};

TEST_F(JoinCoordinatorTest, AnAspJoinerIsMemberOnceEveryLiveServerAnswered) {
  nodes_.servers()[1].state = NodeState::kDead;
  ASSERT_TRUE(Join(Joiner("j")).ok());
  ASSERT_EQ(nodes_.workers().size(), 2u);
  EXPECT_EQ(nodes_.workers()[1].data_shard, -1);  // no orphaned shard to take
  EXPECT_TRUE(joins_.IsJoining(1));
  std::vector<MembershipNote> notes = joins_.TakeMemberships();
  ASSERT_EQ(notes.size(), 1u);  // the live server only
  EXPECT_EQ(notes[0].endpoint, "tcp://s0");
  EXPECT_EQ(notes[0].rank, 1);
  EXPECT_EQ(notes[0].membership.num_workers(), 2);
  EXPECT_EQ(notes[0].membership.worker_ids(1), "j");
  EXPECT_TRUE(joins_.TakeCompleted().empty());
  joins_.ServerAnswered(1, ClockReply(0));
  std::vector<CompletedJoin> done = joins_.TakeCompleted();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].rank, 1);
  EXPECT_EQ(done[0].join_clock, 0);
  EXPECT_EQ(done[0].responder.routing_id(), "j");
  EXPECT_FALSE(joins_.IsJoining(1));
}

TEST_F(JoinCoordinatorTest, AJoinerTakesTheOldestOrphanedShard) {
  joins_.ShardOrphaned(4);
  joins_.ShardOrphaned(2);
  ASSERT_TRUE(Join(Joiner("j", /*wants_shard=*/true)).ok());
  EXPECT_EQ(nodes_.workers()[1].data_shard, 4);
  EXPECT_EQ(joins_.orphan_shards().size(), 1u);
  joins_.ShardsDealtOut();
  EXPECT_TRUE(joins_.orphan_shards().empty());
}

TEST_F(JoinCoordinatorTest, AJoinerWantingAShardWaitsForOneOrThreeHeartbeatTimeouts) {
  ASSERT_TRUE(Join(Joiner("j", /*wants_shard=*/true)).ok());
  EXPECT_EQ(nodes_.workers().size(), 1u);  // waiting, not joined
  joins_.AdmitWaiting(kT0 + absl::Seconds(8), /*ending=*/false);
  EXPECT_EQ(nodes_.workers().size(), 1u);
  joins_.ShardOrphaned(0);
  joins_.AdmitWaiting(kT0 + absl::Seconds(8), /*ending=*/false);
  ASSERT_EQ(nodes_.workers().size(), 2u);
  EXPECT_EQ(nodes_.workers()[1].data_shard, 0);
  ASSERT_TRUE(Join(Joiner("k", /*wants_shard=*/true), kT0 + absl::Seconds(10)).ok());
  joins_.AdmitWaiting(kT0 + absl::Seconds(19), /*ending=*/false);
  ASSERT_EQ(nodes_.workers().size(), 3u);  // 9 s waited: joins without a shard
  EXPECT_EQ(nodes_.workers()[2].data_shard, -1);
  EXPECT_TRUE(sink_.Take().empty());
}

TEST_F(JoinCoordinatorTest, RefusalsSayWhy) {
  EXPECT_EQ(Join(Joiner("w0")),
            absl::AlreadyExistsError("this worker instance is registered already"));
  ASSERT_TRUE(Join(Joiner("a", true)).ok());
  Responder thief(&sink_, "elsewhere", proto::Header());
  EXPECT_EQ(
      joins_.Join(Joiner("a", true), thief, kT0),
      absl::PermissionDeniedError("REGISTER repeated an instance id over another connection"));
  ASSERT_TRUE(Join(Joiner("b", true)).ok());
  EXPECT_EQ(Join(Joiner("c", true)),
            absl::FailedPreconditionError("as many workers as the job has wait to join already"));
  joins_.AdmitWaiting(kT0, /*ending=*/true);
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[0].second.header.code(), proto::FAILED_PRECONDITION);
  EXPECT_EQ(replies[0].second.header.error(), "the job is ending");
}

class BspJoinTest : public JoinCoordinatorTest {
 protected:
  BspJoinTest() : JoinCoordinatorTest(proto::BSP) {}
};

TEST_F(BspJoinTest, JoinsAtTheLargestClockTheServersAnswer) {
  EXPECT_TRUE(joins_.JoinsAtAClock());
  ASSERT_TRUE(Join(Joiner("j")).ok());
  std::vector<MembershipNote> prepare = joins_.TakeMemberships();
  ASSERT_EQ(prepare.size(), 2u);
  EXPECT_TRUE(prepare[0].membership.prepare());
  ASSERT_TRUE(Join(Joiner("k")).ok());  // one join at a time: it waits
  EXPECT_EQ(nodes_.workers().size(), 2u);
  joins_.ServerAnswered(1, ClockReply(7));
  joins_.ServerAnswered(1, ClockReply(5));
  std::vector<MembershipNote> commit = joins_.TakeMemberships();
  ASSERT_EQ(commit.size(), 2u);
  EXPECT_EQ(commit[1].membership.join_clock(), 7);
  EXPECT_EQ(commit[1].membership.num_workers(), 2);
  joins_.ServerAnswered(1, ClockReply(0));
  joins_.ServerAnswered(1, ClockReply(0));
  std::vector<CompletedJoin> done = joins_.TakeCompleted();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].join_clock, 7);
  joins_.AdmitWaiting(kT0, /*ending=*/false);  // now k's turn
  EXPECT_EQ(nodes_.workers().size(), 3u);
}

TEST_F(BspJoinTest, AServerThatCannotPrepareCancelsTheJoin) {
  joins_.ShardOrphaned(3);
  ASSERT_TRUE(Join(Joiner("j", /*wants_shard=*/true)).ok());
  joins_.TakeMemberships();
  joins_.ServerAnswered(1, ClockReply(2));
  joins_.ServerAnswered(1, absl::UnavailableError("gone"));
  std::vector<MembershipNote> cancel = joins_.TakeMemberships();
  ASSERT_EQ(cancel.size(), 2u);
  EXPECT_TRUE(cancel[0].membership.cancel());
  EXPECT_EQ(nodes_.workers().size(), 1u);  // it never was a worker
  ASSERT_EQ(joins_.orphan_shards().size(), 1u);
  EXPECT_EQ(joins_.orphan_shards().front(), 3);  // its shard is free again
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].second.header.code(), proto::NOT_READY);
  EXPECT_EQ(replies[0].second.header.error(),
            "the servers could not agree on a clock for this worker to join at; register again");
  EXPECT_FALSE(joins_.IsJoining(1));
}

}  // namespace
}  // namespace r2sp
