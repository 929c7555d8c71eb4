// Tests of the scheduler's NodeTable: ranks by role, the sender check's refusals (the words
// peers see), the address book's nodes, membership and heartbeat news, live nodes and shards.
#include "scheduler/node_table.h"

#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/fakes.h"

namespace r2sp {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

proto::Header From(proto::Role role, int rank) {
  proto::Header header;
  header.set_type(proto::BARRIER);
  header.set_sender_role(role);
  header.set_sender_rank(rank);
  return header;
}

class NodeTableTest : public ::testing::Test {
 protected:
  NodeTableTest() {
    table_.Add(proto::SERVER, "tcp://s0", "s0-id", "s0", kT0);
    table_.Add(proto::WORKER, "tcp://w0", "w0-id", "w0", kT0);
    table_.Add(proto::WORKER, "tcp://w1", "w1-id", "w1", kT0);
  }
  Responder Over(const std::string& routing_id, proto::Role key = proto::ROLE_UNSPECIFIED) {
    return Responder(&sink_, routing_id, proto::Header(), key);
  }

  testing::RecordingSink sink_;
  NodeTable table_;
};

TEST_F(NodeTableTest, RanksCountPerRoleAndTheShardIsTheRank) {
  ASSERT_EQ(table_.servers().size(), 1u);
  ASSERT_EQ(table_.workers().size(), 2u);
  EXPECT_EQ(table_.servers()[0].rank, 0);
  EXPECT_EQ(table_.servers()[0].data_shard, 0);
  // A server's shard is its rank too (a replaced server's REGISTER reply carries it).
  EXPECT_EQ(table_.Add(proto::SERVER, "tcp://s1", "s1-id", "s1", kT0).data_shard, 1);
  table_.servers().pop_back();
  EXPECT_EQ(table_.workers()[1].rank, 1);
  EXPECT_EQ(table_.workers()[1].data_shard, 1);
  EXPECT_EQ(table_.workers()[1].last_seen, kT0);
  EXPECT_EQ(table_.workers()[1].state, NodeState::kAlive);
  table_.RemoveLastWorker();
  EXPECT_EQ(table_.workers().size(), 1u);
}

TEST_F(NodeTableTest, SenderIsTheNodeOverItsOwnConnection) {
  absl::StatusOr<Node*> sender = table_.Sender(From(proto::WORKER, 1), Over("w1"));
  ASSERT_TRUE(sender.ok()) << sender.status();
  EXPECT_EQ(*sender, &table_.workers()[1]);
  sender = table_.Sender(From(proto::SERVER, 0), Over("s0", proto::SERVER));
  ASSERT_TRUE(sender.ok()) << sender.status();
  EXPECT_EQ(*sender, &table_.servers()[0]);
}

TEST_F(NodeTableTest, SenderRefusalsKeepTheirWords) {
  EXPECT_EQ(table_.Sender(From(proto::WORKER, 1), Over("w0")).status(),
            absl::PermissionDeniedError("the request did not come over worker 1's connection"));
  EXPECT_EQ(table_.Sender(From(proto::WORKER, 1), Over("w1", proto::SERVER)).status(),
            absl::PermissionDeniedError("the sender's key is not a worker's"));
  EXPECT_EQ(table_.Sender(From(proto::WORKER, 2), Over("w1")).status(),
            absl::InvalidArgumentError("unknown sender WORKER 2"));
  EXPECT_EQ(table_.Sender(From(proto::SERVER, -1), Over("s0")).status(),
            absl::InvalidArgumentError("unknown sender SERVER -1"));
  EXPECT_EQ(table_.Sender(From(proto::SCHEDULER, 0), Over("x")).status(),
            absl::InvalidArgumentError("unknown sender SCHEDULER 0"));
}

TEST_F(NodeTableTest, FindsInstancesByRole) {
  ASSERT_NE(table_.FindInstance(proto::WORKER, "w1-id"), nullptr);
  EXPECT_EQ(table_.FindInstance(proto::WORKER, "w1-id")->rank, 1);
  EXPECT_EQ(table_.FindInstance(proto::SERVER, "w1-id"), nullptr);
  EXPECT_EQ(table_.FindInstance(proto::WORKER, "nobody"), nullptr);
}

TEST_F(NodeTableTest, TheServersBookAloneCarriesTheWorkersRoutingIds) {
  table_.servers()[0].incarnation = 2;
  proto::AddressBook book;
  table_.AddNodesTo(book, /*for_servers=*/false);
  ASSERT_EQ(book.servers_size(), 1);
  ASSERT_EQ(book.workers_size(), 2);
  EXPECT_EQ(book.servers(0).endpoint(), "tcp://s0");
  EXPECT_EQ(book.servers(0).incarnation(), 2);
  EXPECT_EQ(book.servers(0).role(), proto::SERVER);
  EXPECT_EQ(book.workers(1).rank(), 1);
  EXPECT_EQ(book.workers(1).routing_id(), "");
  proto::AddressBook server_book;
  table_.AddNodesTo(server_book, /*for_servers=*/true);
  EXPECT_EQ(server_book.workers(1).routing_id(), "w1");
  EXPECT_EQ(server_book.servers(0).routing_id(), "");
}

TEST_F(NodeTableTest, MembershipAndNewsFollowTheWorkersStates) {
  proto::Membership grown = table_.Grown();
  EXPECT_EQ(grown.num_workers(), 2);
  EXPECT_EQ(std::vector<std::string>(grown.worker_ids().begin(), grown.worker_ids().end()),
            (std::vector<std::string>{"w0", "w1"}));
  EXPECT_TRUE(table_.AnyWorkerAlive());
  EXPECT_FALSE(table_.AnyWorkerFinished());
  table_.SetState(table_.workers()[0], NodeState::kDead);
  table_.SetState(table_.workers()[1], NodeState::kFinished);
  proto::HeartbeatReply beat;
  table_.AddWorkerNews(/*seen=*/0, beat);
  EXPECT_EQ(std::vector<int>(beat.dead_workers().begin(), beat.dead_workers().end()),
            std::vector<int>{0});
  EXPECT_EQ(std::vector<int>(beat.finished_workers().begin(), beat.finished_workers().end()),
            std::vector<int>{1});
  EXPECT_FALSE(table_.AnyWorkerAlive());
  EXPECT_TRUE(table_.AnyWorkerFinished());
  // Live: the server alone; shards of workers not dead: worker 1's.
  const std::vector<NodeId> live = table_.Live();
  ASSERT_EQ(live.size(), 1u);
  EXPECT_TRUE(live[0] == (NodeId{proto::SERVER, 0}));
  EXPECT_EQ(table_.LiveShards(), std::vector<int>{1});
}

TEST_F(NodeTableTest, OnlyAWorkersDeathOrFinishIsNewsAndOnlyOnce) {
  Node& server = table_.servers()[0];
  table_.SetState(server, NodeState::kDead);
  table_.SetState(server, NodeState::kAlive);  // a replacement took its rank
  table_.SetState(table_.workers()[1], NodeState::kDead);
  table_.SetState(table_.workers()[1], NodeState::kDead);  // the same state: no news
  proto::HeartbeatReply beat;
  table_.AddWorkerNews(/*seen=*/0, beat);
  EXPECT_EQ(std::vector<int>(beat.dead_workers().begin(), beat.dead_workers().end()),
            std::vector<int>{1});
  EXPECT_EQ(beat.finished_workers_size(), 0);
  EXPECT_EQ(beat.news_version(), 1);
  EXPECT_EQ(server.state, NodeState::kAlive);
}

TEST_F(NodeTableTest, AWorkerDoesNotComeBackFromTheDeadDeathTest) {
  table_.SetState(table_.workers()[0], NodeState::kDead);
  EXPECT_DEATH(table_.SetState(table_.workers()[0], NodeState::kAlive),
               "worker 0 cannot change state again");
  EXPECT_DEATH(table_.SetState(table_.workers()[0], NodeState::kFinished),
               "worker 0 cannot change state again");
}

}  // namespace
}  // namespace r2sp
