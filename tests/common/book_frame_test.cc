// Tests of the address book as a REGISTER reply's payload frame: lent without a copy, read
// back whole, the header's book still read, and a broken reply refused with a message.
#include "common/book_frame.h"

#include <utility>

#include "gtest/gtest.h"

namespace r2sp {
namespace {

proto::AddressBook Book() {
  proto::AddressBook book;
  book.set_job_id("job");
  proto::NodeInfo* w = book.add_workers();
  w->set_rank(3);
  w->set_routing_id("w3");
  return book;
}

TEST(BookFrameTest, FramesShareTheEncodingAndOutliveTheBookFrame) {
  Message a;
  Message b;
  {
    const BookFrame frame(Book());
    EXPECT_EQ(frame.size(), Book().SerializeAsString().size());
    AttachBook(frame, a);
    AttachBook(frame, b);
  }
  ASSERT_EQ(a.payload.size(), 1u);
  EXPECT_EQ(a.payload[0].data(), b.payload[0].data());  // one encoding, lent twice
  EXPECT_EQ(a.payload[0].to_string(), Book().SerializeAsString());
  EXPECT_TRUE(a.header.register_reply().book_in_payload());
}

TEST(BookFrameTest, RegisterReplyOfPutsTheBookInPlace) {
  Message reply;
  reply.header.mutable_register_reply()->set_rank(7);
  AttachBook(BookFrame(Book()), reply);
  const absl::StatusOr<proto::RegisterReply> r = RegisterReplyOf(reply);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rank(), 7);
  EXPECT_EQ(r->book().job_id(), "job");
  EXPECT_EQ(r->book().workers(0).routing_id(), "w3");
  EXPECT_FALSE(r->book_in_payload());
}

TEST(BookFrameTest, ABookInTheHeaderIsReadAsItCame) {
  Message reply;
  *reply.header.mutable_register_reply()->mutable_book() = Book();
  const absl::StatusOr<proto::RegisterReply> r = RegisterReplyOf(reply);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->book().job_id(), "job");
}

TEST(BookFrameTest, ABrokenReplyIsRefusedSayingWhy) {
  EXPECT_EQ(RegisterReplyOf(Message()).status(),
            absl::InternalError("the scheduler's REGISTER reply has no register_reply"));
  Message no_frame;
  no_frame.header.mutable_register_reply()->set_book_in_payload(true);
  Message garbage;
  garbage.header.mutable_register_reply()->set_book_in_payload(true);
  garbage.payload.emplace_back("\xff\xff\xff", 3);
  for (const Message* m : {&no_frame, &garbage}) {
    const absl::Status s = RegisterReplyOf(*m).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
    EXPECT_EQ(s.message(),
              "the scheduler's REGISTER reply says its address book is in the payload, but it "
              "has no single frame that parses as one (scheduler and node of different "
              "versions?)");
  }
}

}  // namespace
}  // namespace r2sp
