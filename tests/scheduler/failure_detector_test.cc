// Tests of the scheduler's FailureDetector: silence past the heartbeat timeout, progress that
// stands still past the progress timeout (not while waiting or joining), heartbeats, and the
// restart of the progress clocks.
#include "scheduler/failure_detector.h"

#include "gtest/gtest.h"

namespace r2sp {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

class FailureDetectorTest : public ::testing::Test {
 protected:
  FailureDetectorTest() {
    nodes_.Add(proto::SERVER, "tcp://s0", "s0", "s0", kT0);
    nodes_.Add(proto::WORKER, "tcp://w0", "w0", "w0", kT0);
    nodes_.Add(proto::WORKER, "tcp://w1", "w1", "w1", kT0);
  }
  std::vector<FailureDetector::Death> Detect(absl::Time now, bool joining = false,
                                             bool waiting = false) {
    return detector_.Detect(
        nodes_, now, [joining](const Node&) { return joining; },
        [waiting](const Node&) { return waiting; });
  }
  NodeTable nodes_;
  FailureDetector detector_{absl::Seconds(3), absl::Seconds(10)};
};

TEST_F(FailureDetectorTest, SilencePastTheTimeoutIsDeath) {
  EXPECT_TRUE(Detect(kT0 + absl::Seconds(3)).empty());  // not past it yet
  FailureDetector::Heard(nodes_.workers()[1], 1, kT0 + absl::Seconds(2));
  const std::vector<FailureDetector::Death> deaths = Detect(kT0 + absl::Seconds(4));
  ASSERT_EQ(deaths.size(), 2u);
  EXPECT_EQ(deaths[0].node, &nodes_.servers()[0]);  // servers first
  EXPECT_EQ(deaths[0].why, "silent for 4s");
  EXPECT_EQ(deaths[1].node, &nodes_.workers()[0]);
  EXPECT_EQ(nodes_.servers()[0].state, NodeState::kDead);
  EXPECT_EQ(nodes_.workers()[1].state, NodeState::kAlive);
  EXPECT_TRUE(Detect(kT0 + absl::Seconds(4)).empty());  // the dead die once
}

TEST_F(FailureDetectorTest, ProgressThatStandsStillIsDeathUnlessWaiting) {
  Node& w0 = nodes_.workers()[0];
  auto beat_all = [this](int64_t progress, absl::Time at) {
    for (Node& n : nodes_.servers()) FailureDetector::Heard(n, 0, at);
    for (Node& n : nodes_.workers()) FailureDetector::Heard(n, progress, at);
  };
  beat_all(5, kT0);
  EXPECT_EQ(w0.progress, 5);
  EXPECT_EQ(w0.last_progress, kT0);
  beat_all(5, kT0 + absl::Seconds(9));
  EXPECT_EQ(w0.last_progress, kT0);  // the same count: it stands still
  EXPECT_TRUE(Detect(kT0 + absl::Seconds(9), false, /*waiting=*/true).empty());
  EXPECT_EQ(w0.last_progress, kT0 + absl::Seconds(9));  // waiting restarts it
  beat_all(5, kT0 + absl::Seconds(19));
  EXPECT_TRUE(Detect(kT0 + absl::Seconds(19)).empty());  // 10 s: not past it
  beat_all(5, kT0 + absl::Seconds(20));
  const std::vector<FailureDetector::Death> deaths = Detect(kT0 + absl::Seconds(20));
  ASSERT_EQ(deaths.size(), 2u);
  EXPECT_EQ(deaths[0].node, &w0);
  EXPECT_EQ(deaths[0].why, "no progress for 11s although its heartbeats came (hung?)");
  EXPECT_EQ(nodes_.servers()[0].state, NodeState::kAlive);  // servers report no progress
}

TEST_F(FailureDetectorTest, JoinersAreNeitherSilentNorStalled) {
  const std::vector<FailureDetector::Death> deaths =
      Detect(kT0 + absl::Seconds(60), /*joining=*/true);
  // The server is no joiner: it died; the joining workers' clocks restarted.
  ASSERT_EQ(deaths.size(), 1u);
  EXPECT_EQ(deaths[0].node, &nodes_.servers()[0]);
  EXPECT_EQ(deaths[0].why, "silent for 1m");
  EXPECT_EQ(nodes_.workers()[0].state, NodeState::kAlive);
  EXPECT_EQ(nodes_.workers()[0].last_seen, kT0 + absl::Seconds(60));
  EXPECT_EQ(nodes_.workers()[0].last_progress, kT0 + absl::Seconds(60));
}

TEST_F(FailureDetectorTest, RestartProgressClocksTouchesLiveWorkersOnly) {
  nodes_.workers()[1].state = NodeState::kFinished;
  FailureDetector::RestartProgressClocks(nodes_, kT0 + absl::Seconds(7));
  EXPECT_EQ(nodes_.workers()[0].last_progress, kT0 + absl::Seconds(7));
  EXPECT_EQ(nodes_.workers()[1].last_progress, absl::Time());
}

TEST(FailureDetectorNoProgressTimeoutTest, ZeroNeverDeclaresAStall) {
  NodeTable nodes;
  nodes.Add(proto::WORKER, "tcp://w0", "w0", "w0", kT0);
  FailureDetector detector(absl::Seconds(3), absl::ZeroDuration());
  FailureDetector::Heard(nodes.workers()[0], 1, kT0);
  for (int s = 1; s < 100; ++s) {
    FailureDetector::Heard(nodes.workers()[0], 1, kT0 + absl::Seconds(s));
  }
  EXPECT_TRUE(detector
                  .Detect(
                      nodes, kT0 + absl::Seconds(100), [](const Node&) { return false; },
                      [](const Node&) { return false; })
                  .empty());
}

}  // namespace
}  // namespace r2sp

namespace r2sp {
namespace {

// The scheduler's own pause (Forgive) is not the nodes' silence: a node last heard 2 s before a
// 5 s stall is not dead right after it, but is 3 s after its forgiven time with nothing heard.
TEST(FailureDetectorForgiveTest, AStallMovesTheSilenceClocksOfLiveNodesOnly) {
  NodeTable nodes;
  nodes.Add(proto::WORKER, "tcp://w0", "w0", "w0", kT0);
  nodes.Add(proto::WORKER, "tcp://w1", "w1", "w1", kT0);
  nodes.workers()[1].state = NodeState::kFinished;
  FailureDetector detector(absl::Seconds(3), absl::ZeroDuration());
  auto detect = [&](absl::Time now) {
    return detector.Detect(
        nodes, now, [](const Node&) { return false; }, [](const Node&) { return false; });
  };
  FailureDetector::Forgive(nodes, absl::Seconds(5));
  EXPECT_EQ(nodes.workers()[0].last_seen, kT0 + absl::Seconds(5));
  EXPECT_EQ(nodes.workers()[1].last_seen, kT0);  // not alive: untouched
  EXPECT_TRUE(detect(kT0 + absl::Seconds(7)).empty());
  ASSERT_EQ(detect(kT0 + absl::Seconds(8) + absl::Milliseconds(1)).size(), 1u);
}

}  // namespace
}  // namespace r2sp
