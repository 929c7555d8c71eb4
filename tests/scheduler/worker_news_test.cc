// Tests of WorkerNews: a heartbeat reply names the dead and finished workers learnt after the
// version its node has taken in, in rank order, and the version it brings the node to.
#include "scheduler/worker_news.h"

#include <vector>

#include "gtest/gtest.h"

namespace r2sp {
namespace {

struct Told {
  std::vector<int> dead;
  std::vector<int> finished;
  int64_t version;
};

Told Tell(const WorkerNews& news, int64_t seen) {
  proto::HeartbeatReply beat;
  news.AddTo(seen, beat);
  return Told{std::vector<int>(beat.dead_workers().begin(), beat.dead_workers().end()),
              std::vector<int>(beat.finished_workers().begin(), beat.finished_workers().end()),
              beat.news_version()};
}

TEST(WorkerNewsTest, NoNewsIsVersionZeroAndAnEmptyReply) {
  const WorkerNews news;
  const Told told = Tell(news, 0);
  EXPECT_TRUE(told.dead.empty());
  EXPECT_TRUE(told.finished.empty());
  EXPECT_EQ(told.version, 0);
}

TEST(WorkerNewsTest, SeenZeroHearsEverythingInRankOrder) {
  WorkerNews news;
  news.Died(7);
  news.Finished(3);
  news.Died(2);
  news.Finished(1);
  EXPECT_EQ(news.version(), 4);
  const Told told = Tell(news, 0);
  EXPECT_EQ(told.dead, (std::vector<int>{2, 7}));
  EXPECT_EQ(told.finished, (std::vector<int>{1, 3}));
  EXPECT_EQ(told.version, 4);
}

TEST(WorkerNewsTest, ANodeHearsOnlyWhatCameAfterTheVersionItSaw) {
  WorkerNews news;
  news.Died(5);
  news.Finished(0);
  const Told first = Tell(news, 0);
  EXPECT_EQ(first.version, 2);
  news.Died(9);
  news.Finished(4);
  news.Died(1);
  const Told second = Tell(news, first.version);
  EXPECT_EQ(second.dead, (std::vector<int>{1, 9}));
  EXPECT_EQ(second.finished, (std::vector<int>{4}));
  EXPECT_EQ(second.version, 5);
  const Told third = Tell(news, second.version);  // nothing new
  EXPECT_TRUE(third.dead.empty());
  EXPECT_TRUE(third.finished.empty());
  EXPECT_EQ(third.version, 5);
}

TEST(WorkerNewsTest, AVersionThisSchedulerNeverGaveHearsEverything) {
  WorkerNews news;
  news.Died(3);
  news.Finished(2);
  for (const int64_t seen : {int64_t{-1}, int64_t{3}, int64_t{1000}}) {
    const Told told = Tell(news, seen);
    EXPECT_EQ(told.dead, std::vector<int>{3}) << seen;
    EXPECT_EQ(told.finished, std::vector<int>{2}) << seen;
    EXPECT_EQ(told.version, 2) << seen;
  }
}

}  // namespace
}  // namespace r2sp
