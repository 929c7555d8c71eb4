// Tests of the scheduler's BarrierBook: group membership, refusals with their words, release
// once every live member arrived (dead members not waited for), ids counting up per group.
#include "scheduler/barrier_book.h"

#include "gtest/gtest.h"
#include "tests/testing/fakes.h"

namespace r2sp {
namespace {

proto::Header Barrier(proto::Group group, uint64_t id) {
  proto::Header header;
  header.set_type(proto::BARRIER);
  header.mutable_barrier()->set_group(group);
  header.mutable_barrier()->set_barrier_id(id);
  return header;
}

constexpr NodeId kServer0{proto::SERVER, 0};
constexpr NodeId kWorker0{proto::WORKER, 0};
constexpr NodeId kWorker1{proto::WORKER, 1};

class BarrierBookTest : public ::testing::Test {
 protected:
  Responder From(const std::string& routing_id) {
    return Responder(&sink_, routing_id, Barrier(proto::ALL, 0));
  }
  testing::RecordingSink sink_;
  BarrierBook book_;
};

TEST_F(BarrierBookTest, GroupsByRole) {
  EXPECT_TRUE(BarrierBook::InGroup(proto::SERVER, proto::ALL));
  EXPECT_TRUE(BarrierBook::InGroup(proto::WORKER, proto::WORKERS));
  EXPECT_FALSE(BarrierBook::InGroup(proto::SERVER, proto::WORKERS));
  EXPECT_TRUE(BarrierBook::InGroup(proto::SERVER, proto::SERVERS));
  EXPECT_FALSE(BarrierBook::InGroup(proto::WORKER, proto::SERVERS));
  EXPECT_FALSE(BarrierBook::InGroup(proto::WORKER, static_cast<proto::Group>(99)));
}

TEST_F(BarrierBookTest, CompletesOnceEveryLiveMemberArrived) {
  const std::vector<NodeId> live = {kServer0, kWorker0, kWorker1};
  Responder w0 = From("w0");
  ASSERT_TRUE(book_.Arrive(Barrier(proto::WORKERS, 0), kWorker0, w0).ok());
  book_.Release(live);
  EXPECT_TRUE(sink_.Take().empty());  // worker 1 is awaited; the server is not a member
  EXPECT_TRUE(book_.IsWaiting(kWorker0));
  EXPECT_FALSE(book_.IsWaiting(kWorker1));
  Responder w1 = From("w1");
  ASSERT_TRUE(book_.Arrive(Barrier(proto::WORKERS, 0), kWorker1, w1).ok());
  book_.Release(live);
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[0].first, "w0");
  EXPECT_EQ(replies[1].first, "w1");
  EXPECT_EQ(replies[1].second.header.code(), proto::OK);
  EXPECT_FALSE(book_.IsWaiting(kWorker0));
  EXPECT_EQ(book_.current(proto::WORKERS), 1u);
  EXPECT_EQ(book_.current(proto::ALL), 0u);
}

TEST_F(BarrierBookTest, ADeadMemberIsNotWaitedFor) {
  Responder w0 = From("w0");
  ASSERT_TRUE(book_.Arrive(Barrier(proto::ALL, 0), kWorker0, w0).ok());
  book_.Release({kServer0, kWorker0, kWorker1});
  EXPECT_TRUE(sink_.Take().empty());
  book_.Release({kWorker0});  // the server and worker 1 died
  ASSERT_EQ(sink_.Take().size(), 1u);
  EXPECT_EQ(book_.current(proto::ALL), 1u);
}

TEST_F(BarrierBookTest, RefusalsSayWhy) {
  Responder r = From("s0");
  EXPECT_EQ(book_.Arrive(Barrier(proto::WORKERS, 0), kServer0, r),
            absl::InvalidArgumentError("BARRIER for a group the sender is not in"));
  proto::Header no_barrier;
  no_barrier.set_type(proto::BARRIER);
  EXPECT_EQ(book_.Arrive(no_barrier, kServer0, r),
            absl::InvalidArgumentError("BARRIER for a group the sender is not in"));
  EXPECT_EQ(book_.Arrive(Barrier(proto::ALL, 3), kServer0, r),
            absl::InvalidArgumentError("barrier 3 of group ALL but the group is at barrier 0"));
  ASSERT_TRUE(book_.Arrive(Barrier(proto::ALL, 0), kServer0, r).ok());
  Responder again = From("s0");
  EXPECT_EQ(book_.Arrive(Barrier(proto::ALL, 0), kServer0, again),
            absl::AlreadyExistsError("already waiting at this barrier"));
  EXPECT_TRUE(sink_.Take().empty());  // refusals are answered by the caller
}

}  // namespace
}  // namespace r2sp
