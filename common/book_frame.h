// The address book as a REGISTER reply's payload frame: encoded once and lent to every reply
// that carries it (the scheduler answers a whole rendezvous with one encoding instead of a
// copy of the book per node), and read back into the RegisterReply by the node.
#ifndef R2SP_COMMON_BOOK_FRAME_H_
#define R2SP_COMMON_BOOK_FRAME_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/message.h"
#include "proto/messages.pb.h"

namespace r2sp {

// Thread-safety: const methods may be called from any thread; a frame it lent stays valid
// after this object is gone (the bytes are shared, freed with the last frame).
class BookFrame {
 public:
  explicit BookFrame(const proto::AddressBook& book);

  // A frame over the encoded book, sharing its bytes (no copy).
  zmq::message_t Lend() const;
  size_t size() const { return bytes_->size(); }

 private:
  std::shared_ptr<const std::string> bytes_;
};

// Makes `reply` (a REGISTER reply with register_reply set) carry `book` as its only payload
// frame, with register_reply.book_in_payload. REQUIRES: `reply` has no payload yet.
void AttachBook(const BookFrame& book, Message& reply);

// The register_reply of a REGISTER reply, its book in place whether it came in the header or
// in the payload (book_in_payload). INTERNAL if the reply has none or the frame does not parse.
absl::StatusOr<proto::RegisterReply> RegisterReplyOf(const Message& reply);

}  // namespace r2sp

#endif  // R2SP_COMMON_BOOK_FRAME_H_
