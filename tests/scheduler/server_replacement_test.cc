// Tests of the scheduler's ServerReplacement: the loss of a server awaited or failing the job
// (always in bsp), an overdue replacement, a replacement taking the lowest lost rank one
// incarnation on, a replacement waiting for the loss, and the heartbeat's news.
#include "scheduler/server_replacement.h"

#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/fakes.h"

namespace r2sp {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(100);

proto::RegisterRequest NewServer(const std::string& instance) {
  proto::RegisterRequest reg;
  reg.set_role(proto::SERVER);
  reg.set_instance_id(instance);
  reg.set_endpoint("tcp://" + instance);
  return reg;
}

class ServerReplacementTest : public ::testing::Test {
 protected:
  explicit ServerReplacementTest(proto::SyncMode sync = proto::ASP)
      : replacement_(
            ServerReplacementOptions{sync, /*num_servers=*/2, absl::Seconds(30), absl::Seconds(3)},
            &nodes_) {
    nodes_.Add(proto::SERVER, "tcp://s0", "s0", "s0", kT0);
    nodes_.Add(proto::SERVER, "tcp://s1", "s1", "s1", kT0);
  }
  void Die(int rank) {
    nodes_.servers()[rank].state = NodeState::kDead;
    ASSERT_TRUE(replacement_.Lost(nodes_.servers()[rank], "silent", kT0).ok());
  }
  absl::StatusOr<Node*> Replace(const std::string& instance, bool waited = false,
                                const std::string& failure = "") {
    Responder r(&sink_, "new-" + instance, proto::Header());
    return replacement_.Replace(NewServer(instance), r, kT0 + absl::Seconds(1), failure, waited);
  }
  testing::RecordingSink sink_;
  NodeTable nodes_;
  ServerReplacement replacement_;
};

TEST_F(ServerReplacementTest, ALostServerIsAwaitedUntilItsReplacementIsOverdue) {
  EXPECT_EQ(replacement_.timeout(), absl::Seconds(30));
  Die(1);
  EXPECT_EQ(nodes_.servers()[1].replace_by, kT0 + absl::Seconds(30));
  EXPECT_EQ(*replacement_.Awaiting(kT0 + absl::Seconds(30), /*ending=*/false), true);
  EXPECT_EQ(replacement_.Awaiting(kT0 + absl::Seconds(31), /*ending=*/false).status().message(),
            "server 1 was lost and no replacement registered within 30s (--server_replace_s); "
            "resume the job from the servers' checkpoints (tools/launch --resume=RUN_DIR)");
  EXPECT_EQ(*replacement_.Awaiting(kT0 + absl::Seconds(32), /*ending=*/false), false);
}

TEST_F(ServerReplacementTest, AReplacementTakesTheLowestLostRank) {
  Die(1);
  Die(0);
  absl::StatusOr<Node*> replaced = Replace("n");
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  ASSERT_EQ(*replaced, &nodes_.servers()[0]);
  const Node& s0 = nodes_.servers()[0];
  EXPECT_EQ(s0.state, NodeState::kAlive);
  EXPECT_EQ(s0.incarnation, 1);
  EXPECT_EQ(s0.endpoint, "tcp://n");
  EXPECT_EQ(s0.routing_id, "new-n");
  EXPECT_EQ(s0.last_seen, kT0 + absl::Seconds(1));
  EXPECT_EQ(s0.replace_by, absl::InfinitePast());
  proto::HeartbeatReply beat;
  replacement_.AddNews(beat);
  EXPECT_EQ(std::vector<int>(beat.replacing_servers().begin(), beat.replacing_servers().end()),
            std::vector<int>{1});
  ASSERT_EQ(beat.servers_size(), 2);  // a server was replaced: every server's address
  EXPECT_EQ(beat.servers(0).endpoint(), "tcp://n");
  EXPECT_EQ(beat.servers(0).incarnation(), 1);
}

TEST_F(ServerReplacementTest, AnEarlyReplacementWaitsForTheLoss) {
  absl::StatusOr<Node*> parked = Replace("n");
  ASSERT_TRUE(parked.ok());
  EXPECT_EQ(*parked, nullptr);
  std::vector<std::string> retried;
  auto retry = [&](WaitingRegister& w) { retried.push_back(w.request.instance_id()); };
  replacement_.AdmitWaiting(kT0 + absl::Seconds(8), /*ending=*/false, retry);
  EXPECT_TRUE(retried.empty());  // nothing lost, 8 s < 3 heartbeat timeouts
  Die(1);
  replacement_.AdmitWaiting(kT0 + absl::Seconds(8), /*ending=*/false, retry);
  EXPECT_EQ(retried, std::vector<std::string>{"n"});
  replacement_.AdmitWaiting(kT0 + absl::Seconds(8), /*ending=*/false, retry);
  EXPECT_EQ(retried.size(), 1u);  // taken out
}

TEST_F(ServerReplacementTest, RefusalsSayWhy) {
  EXPECT_EQ(Replace("s0").status(),
            absl::AlreadyExistsError("this server instance is registered already"));
  EXPECT_EQ(Replace("n", false, "boom").status(),
            absl::FailedPreconditionError("the job failed: boom"));
  EXPECT_EQ(Replace("n", /*waited=*/true).status(),
            absl::FailedPreconditionError(
                "the job has all its servers, and none was lost (a server may join a running job "
                "only to replace a lost one)"));
  ASSERT_TRUE(Replace("a").ok());
  ASSERT_TRUE(Replace("b").ok());
  EXPECT_EQ(Replace("c").status(),
            absl::FailedPreconditionError(
                "as many servers as the job has wait to replace lost ones already"));
  replacement_.AdmitWaiting(kT0, /*ending=*/true, [](WaitingRegister&) { FAIL(); });
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[1].second.header.error(), "the job is ending");
}

class BspReplacementTest : public ServerReplacementTest {
 protected:
  BspReplacementTest() : ServerReplacementTest(proto::BSP) {}
};

TEST_F(BspReplacementTest, TheLossOfAServerFailsTheJob) {
  EXPECT_EQ(replacement_.timeout(), absl::ZeroDuration());
  nodes_.servers()[0].state = NodeState::kDead;
  EXPECT_EQ(replacement_.Lost(nodes_.servers()[0], "silent for 4s", kT0).message(),
            "server 0 at tcp://s0 was lost (silent for 4s); the job cannot go on without its "
            "shard: resume it from the servers' checkpoints (tools/launch --resume=RUN_DIR); bsp "
            "jobs do not replace servers");
  EXPECT_EQ(Replace("n").status(),
            absl::FailedPreconditionError("the job has all its servers, and does not replace "
                                          "lost ones (--server_replace_s)"));
  proto::HeartbeatReply beat;
  replacement_.AddNews(beat);
  EXPECT_EQ(std::vector<int>(beat.dead_servers().begin(), beat.dead_servers().end()),
            std::vector<int>{0});
  EXPECT_EQ(beat.servers_size(), 0);
}

}  // namespace
}  // namespace r2sp
