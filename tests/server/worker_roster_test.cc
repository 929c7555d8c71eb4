// WorkerRoster (server/worker_roster.h): departures, the bsp join hold and its end, the first
// clock a joiner may take part from in bsp and ssp (and the refusal in asp), checks of a
// MEMBERSHIP that grows the job with their exact errors, and the growth itself.
#include "server/worker_roster.h"

#include <string>
#include <vector>

#include "glog/logging.h"
#include "gtest/gtest.h"

namespace r2sp {
namespace {

ModelLayout Layout() {  // keys 0 and 1 on server 0, 4 floats each
  proto::TensorSpec t;
  t.set_name("w");
  t.set_num_elements(8);
  absl::StatusOr<ModelLayout> layout = ModelLayout::Create({t}, 16, 1);
  CHECK(layout.ok()) << layout.status();
  return *layout;
}

proto::Membership Grow(int num_workers, int64_t join_clock, int ids) {
  proto::Membership m;
  m.set_num_workers(num_workers);
  m.set_join_clock(join_clock);
  for (int i = 0; i < ids; ++i) m.add_worker_ids("w" + std::to_string(i));
  return m;
}

TEST(WorkerRosterTest, DeparturesCountOnce) {
  WorkerRoster roster(proto::ASP);
  roster.Reset(0, 3);
  EXPECT_EQ(roster.num_workers(), 3);
  EXPECT_EQ(roster.live(), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(roster.joined_at(), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_TRUE(roster.Depart({1, 7, -1}));
  EXPECT_EQ(roster.live(), (std::vector<bool>{true, false, true}));
  EXPECT_FALSE(roster.Depart({1}));  // already departed
  EXPECT_FALSE(roster.Depart({}));
}

TEST(WorkerRosterTest, BspPrepareHoldsClocksPastTheOpenOne) {
  const ModelLayout layout = Layout();
  PartitionTable table(layout, 0, 2, true, nullptr);
  (*table.Find(1))->aggregator->ResetTo(4);
  WorkerRoster roster(proto::BSP);
  roster.Reset(0, 2);
  EXPECT_FALSE(roster.Holds(100));
  absl::StatusOr<int64_t> first = roster.Prepare(table);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, 5);
  EXPECT_FALSE(roster.Holds(4));
  EXPECT_TRUE(roster.Holds(5));
  (*table.Find(0))->aggregator->ResetTo(9);  // a second prepare keeps the first hold
  EXPECT_EQ(*roster.Prepare(table), 5);
  EXPECT_EQ(roster.CheckJoinClock(5, table),
            absl::FailedPreconditionError(
                "a worker cannot join at clock 5: partition 0 is at clock 9 already"));
  EXPECT_TRUE(roster.CheckJoinClock(9, table).ok());
  EXPECT_TRUE(roster.EndHold());
  EXPECT_FALSE(roster.Holds(5));
  EXPECT_FALSE(roster.EndHold());
}

TEST(WorkerRosterTest, SspPrepareAnswersTheLeadingLiveClock) {
  PartitionTable table(Layout(), 0, 2, false, nullptr);
  (*table.Find(0))->pushed = {3, 8};
  WorkerRoster roster(proto::SSP);
  roster.Reset(0, 2);
  EXPECT_EQ(*roster.Prepare(table), 8);
  roster.Depart({1});
  EXPECT_EQ(*roster.Prepare(table), 3);
  EXPECT_FALSE(roster.Holds(100));  // ssp never holds
  EXPECT_TRUE(roster.CheckJoinClock(0, table).ok());
  WorkerRoster asp(proto::ASP);
  asp.Reset(0, 2);
  EXPECT_EQ(asp.Prepare(table).status(),
            absl::FailedPreconditionError("MEMBERSHIP prepare is for bsp and ssp joins (asp and "
                                          "r2sp workers join at once)"));
}

TEST(WorkerRosterTest, ChecksAMembershipThatGrowsTheJob) {
  WorkerRoster roster(proto::BSP);
  roster.Reset(0, 2);
  EXPECT_TRUE(roster.CheckGrow(Grow(3, 4, 3)).ok());
  EXPECT_TRUE(roster.CheckGrow(Grow(2, 0, 2)).ok());  // no one new
  EXPECT_EQ(roster.CheckGrow(Grow(1, 0, 1)),
            absl::InvalidArgumentError("cannot go from 2 to 1 workers"));
  EXPECT_EQ(roster.CheckGrow(Grow(2 + 1025, 0, 0)),
            absl::InvalidArgumentError("cannot go from 2 to 1027 workers"));
  EXPECT_EQ(roster.CheckGrow(Grow(3, 0, 2)),
            absl::InvalidArgumentError("MEMBERSHIP names 3 workers but carries 2 ids"));
  EXPECT_EQ(roster.CheckGrow(Grow(3, -1, 3)),
            absl::InvalidArgumentError("MEMBERSHIP: join clock -1 out of range"));
  EXPECT_EQ(roster.CheckGrow(Grow(3, WorkerRoster::kMaxJoinClock + 1, 3)),
            absl::InvalidArgumentError("MEMBERSHIP: join clock 281474976710657 out of range"));
}

TEST(WorkerRosterTest, GrowAddsLiveWorkersFromTheirJoinClock) {
  PartitionTable bsp_table(Layout(), 0, 2, true, nullptr);
  WorkerRoster bsp(proto::BSP);
  bsp.Reset(0, 2);
  bsp.Depart({0});
  bsp.Grow(4, 6, bsp_table);
  EXPECT_EQ(bsp.live(), (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(bsp.joined_at(), (std::vector<int64_t>{0, 0, 6, 6}));
  EXPECT_EQ((*bsp_table.Find(0))->pushed, (std::vector<int64_t>{0, 0, 0, 0}));

  PartitionTable ssp_table(Layout(), 0, 2, false, nullptr);
  WorkerRoster ssp(proto::SSP);
  ssp.Reset(0, 2);
  ssp.Grow(3, 6, ssp_table);  // the joiner counts as having pushed the clocks before its first
  EXPECT_EQ((*ssp_table.Find(1))->pushed, (std::vector<int64_t>{0, 0, 6}));
}

}  // namespace
}  // namespace r2sp
