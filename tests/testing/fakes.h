// Test doubles for the handler interfaces: a ReplySink and a Requester that record what they
// are given, so protocol handlers can be tested without sockets.
#ifndef R2SP_TESTS_TESTING_FAKES_H_
#define R2SP_TESTS_TESTING_FAKES_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/handler.h"
#include "common/message.h"

namespace r2sp::testing {

class RecordingSink : public ReplySink {
 public:
  void SendReply(const std::string& routing_id, Message reply) override {
    absl::MutexLock lock(&mu_);
    replies_.emplace_back(routing_id, std::move(reply));
  }
  // Takes the replies recorded so far.
  std::vector<std::pair<std::string, Message>> Take() {
    absl::MutexLock lock(&mu_);
    return std::move(replies_);
  }

 private:
  absl::Mutex mu_;
  std::vector<std::pair<std::string, Message>> replies_ ABSL_GUARDED_BY(mu_);
};

class RecordingRequester : public Requester {
 public:
  explicit RecordingRequester(std::string routing_id = "scheduler")
      : routing_id_(std::move(routing_id)) {}
  const std::string& RoutingId() const override { return routing_id_; }
  struct Sent {
    std::string peer;
    Message request;
    ReplyCallback callback;
  };
  void Request(const std::string& peer, Message request, absl::Duration /*timeout*/,
               ReplyCallback callback) override {
    sent.push_back({peer, std::move(request), std::move(callback)});
  }
  void ResetPeer(const std::string& peer, const std::string& /*why*/) override {
    resets.push_back(peer);
  }
  std::vector<Sent> sent;
  std::vector<std::string> resets;  // ResetPeer's peers, in order

 private:
  std::string routing_id_;
};

// Hands `request` to `handler` as from routing id `peer` and returns the status of the last
// reply `sink` got for it (OK if none came yet: the request was parked).
inline absl::Status HandleForStatus(RequestHandler& handler, RecordingSink& sink, Message request,
                                    const std::string& peer = "w") {
  Responder responder(&sink, peer, request.header);
  handler.HandleRequest(std::move(request), std::move(responder));
  std::vector<std::pair<std::string, Message>> replies = sink.Take();
  if (replies.empty()) return absl::OkStatus();
  return FromReplyHeader(replies.back().second.header);
}

// Routing ids "w0", "w1", ...: worker r's connection in handler tests.
inline std::vector<std::string> WorkerIds(int n) {
  std::vector<std::string> ids;
  for (int w = 0; w < n; ++w) ids.push_back("w" + std::to_string(w));
  return ids;
}

// A request header from worker `rank`.
inline Message WorkerRequest(proto::MsgType type, int rank, uint64_t key) {
  Message m;
  m.header.set_type(type);
  m.header.set_sender_role(proto::WORKER);
  m.header.set_sender_rank(rank);
  m.header.set_key(key);
  return m;
}

}  // namespace r2sp::testing

#endif  // R2SP_TESTS_TESTING_FAKES_H_
