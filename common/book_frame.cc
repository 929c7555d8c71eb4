// See book_frame.h.
#include "common/book_frame.h"

#include <utility>

#include "glog/logging.h"

namespace r2sp {
namespace {

// libzmq's deallocator for a lent frame: drops the frame's share of the bytes.
void ReleaseShare(void* /*data*/, void* hint) {
  delete static_cast<std::shared_ptr<const std::string>*>(hint);
}

}  // namespace

BookFrame::BookFrame(const proto::AddressBook& book)
    : bytes_(std::make_shared<const std::string>(book.SerializeAsString())) {}

zmq::message_t BookFrame::Lend() const {
  auto* share = new std::shared_ptr<const std::string>(bytes_);
  // libzmq never writes through this pointer; the const_cast only satisfies its C signature.
  return zmq::message_t(const_cast<char*>(bytes_->data()), bytes_->size(), &ReleaseShare, share);
}

void AttachBook(const BookFrame& book, Message& reply) {
  CHECK(reply.payload.empty()) << "the book must be the reply's only payload frame";
  reply.header.mutable_register_reply()->set_book_in_payload(true);
  reply.payload.push_back(book.Lend());
}

absl::StatusOr<proto::RegisterReply> RegisterReplyOf(const Message& reply) {
  if (!reply.header.has_register_reply()) {
    return absl::InternalError("the scheduler's REGISTER reply has no register_reply");
  }
  proto::RegisterReply r = reply.header.register_reply();
  if (!r.book_in_payload()) return r;
  if (reply.payload.size() != 1 ||
      !r.mutable_book()->ParseFromArray(reply.payload[0].data(),
                                        static_cast<int>(reply.payload[0].size()))) {
    return absl::InternalError(
        "the scheduler's REGISTER reply says its address book is in the payload, but it has "
        "no single frame that parses as one (scheduler and node of different versions?)");
  }
  r.set_book_in_payload(false);
  return r;
}

}  // namespace r2sp
