// EvaluatorRole: the lowest live rank evaluates; the role moves down as lower ranks die.
#include "worker/evaluator_role.h"

#include "gtest/gtest.h"

namespace r2sp {
namespace {

proto::HeartbeatReply Dead(std::initializer_list<int> ranks) {
  proto::HeartbeatReply beat;
  for (const int r : ranks) beat.add_dead_workers(r);
  return beat;
}

TEST(EvaluatorRoleTest, RankZeroEvaluatesFromTheStart) {
  EXPECT_TRUE(EvaluatorRole(0).Evaluates());
  EXPECT_FALSE(EvaluatorRole(1).Evaluates());
}

TEST(EvaluatorRoleTest, TheNextRankTakesOverWhenEveryLowerRankIsDead) {
  EvaluatorRole one(1), two(2);
  for (EvaluatorRole* role : {&one, &two}) role->OnHeartbeat(Dead({0}));
  EXPECT_TRUE(one.Evaluates());
  EXPECT_FALSE(two.Evaluates());  // worker 1 lives
  two.OnHeartbeat(Dead({0, 1}));
  EXPECT_TRUE(two.Evaluates());
}

TEST(EvaluatorRoleTest, DeathsAboveItsOwnRankOrOutOfOrderCount) {
  EvaluatorRole two(2);
  two.OnHeartbeat(Dead({3, 5}));  // higher ranks: no say
  EXPECT_FALSE(two.Evaluates());
  two.OnHeartbeat(Dead({1}));
  EXPECT_FALSE(two.Evaluates());  // worker 0 lives
  two.OnHeartbeat(Dead({1, 0}));  // each beat lists every death so far, in any order
  EXPECT_TRUE(two.Evaluates());
  two.OnHeartbeat(Dead({}));  // a beat without news takes nothing back
  EXPECT_TRUE(two.Evaluates());
}

TEST(EvaluatorRoleTest, BadRanksFromTheNetworkAreIgnored) {
  EvaluatorRole one(1);
  one.OnHeartbeat(Dead({-1, -7}));
  EXPECT_FALSE(one.Evaluates());
}

}  // namespace
}  // namespace r2sp
