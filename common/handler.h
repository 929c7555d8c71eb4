// The protocol-handler interface: servers, the scheduler and tests implement RequestHandler
// and answer through a Responder, so protocol logic runs with or without real sockets.
#ifndef R2SP_COMMON_HANDLER_H_
#define R2SP_COMMON_HANDLER_H_

#include <functional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/message.h"

namespace r2sp {

// Where replies go. Thread-safe implementations only.
class ReplySink {
 public:
  virtual ~ReplySink() = default;
  virtual void SendReply(const std::string& routing_id, Message reply) = 0;
};

// Called exactly once with the reply to a request, or with the error that ended it
// (DeadlineExceeded, Cancelled on shutdown). Runs on the transport's I/O thread: it must not
// block.
using ReplyCallback = std::function<void(absl::StatusOr<Message>)>;

// Sends requests to peers. Thread-safe implementations only.
class Requester {
 public:
  virtual ~Requester() = default;
  // The routing id this requester's requests arrive with (Responder::routing_id at the peer,
  // whichever of its connections to the peer carried them).
  virtual const std::string& RoutingId() const = 0;
  // Requests to `peer_endpoint` go to a node of `role`. With CURVE the transport authenticates
  // the peer by that role's key, and sends nothing to an endpoint whose role it was not told.
  virtual void ExpectPeer(const std::string& /*peer_endpoint*/, proto::Role /*role*/) {}
  virtual void Request(const std::string& peer_endpoint, Message request,
                       absl::Duration timeout, ReplyCallback callback) = 0;
  // The peer at `peer_endpoint` was lost: requests to it still unanswered complete with
  // UNAVAILABLE (`why`), and those not yet delivered are dropped, so none reaches a process
  // that takes the endpoint over; later requests go over a new connection.
  virtual void ResetPeer(const std::string& /*peer_endpoint*/, const std::string& /*why*/) {}
};

// Sends `request` and blocks until its reply (or the error that ended it) arrives.
// REQUIRES: not called from the requester's reply thread (the transport's I/O thread).
inline absl::StatusOr<Message> CallAndWait(Requester& requester, const std::string& peer_endpoint,
                                           Message request, absl::Duration timeout) {
  absl::Notification done;
  absl::StatusOr<Message> result = absl::UnknownError("no reply");
  requester.Request(peer_endpoint, std::move(request), timeout,
                    [&done, &result](absl::StatusOr<Message> reply) {
                      result = std::move(reply);
                      done.Notify();
                    });
  done.WaitForNotification();
  return result;
}

// Answers one received request, now or later (handlers may park it). Movable; cheap.
// It also says who sent the request, as the transport knows it: the sending process's routing
// id and, with CURVE, the role whose key the peer proved. Handlers trust these, never the
// header's sender_role and sender_rank alone.
class Responder {
 public:
  // `reply_route`: the connection the reply goes back on, when it is not `routing_id` itself
  // (a process with several connections to this one: Transport's connections_per_peer).
  Responder(ReplySink* sink, std::string routing_id, const proto::Header& request,
            proto::Role authenticated_role = proto::ROLE_UNSPECIFIED,
            std::string reply_route = "")
      : sink_(sink),
        routing_id_(std::move(routing_id)),
        reply_route_(std::move(reply_route)),
        authenticated_role_(authenticated_role) {
    request_.set_type(request.type());
    request_.set_request_id(request.request_id());
    request_.set_key(request.key());
  }

  // Sends `reply`; its header's type, is_reply, request_id are filled in. An error status
  // overrides the code and error text.
  void Reply(Message reply, const absl::Status& status = absl::OkStatus()) {
    proto::Header header = ReplyHeaderFor(request_, status);
    header.MergeFrom(reply.header);
    header.set_is_reply(true);
    header.set_type(request_.type());
    header.set_request_id(request_.request_id());
    if (!status.ok()) {
      header.set_code(ToErrorCode(status));
      header.set_error(std::string(status.message()));
    }
    reply.header = std::move(header);
    sink_->SendReply(reply_route_.empty() ? routing_id_ : reply_route_, std::move(reply));
  }

  // A reply with no payload.
  void ReplyStatus(const absl::Status& status) { Reply(Message(), status); }

  // The sending process (the same for every connection it has to this one).
  const std::string& routing_id() const { return routing_id_; }
  // The sender's role as CURVE authenticated it; ROLE_UNSPECIFIED without authentication.
  proto::Role authenticated_role() const { return authenticated_role_; }
  // Whether the sender may act as `role`: with authentication, it proved that role's key.
  bool MayBe(proto::Role role) const {
    return authenticated_role_ == proto::ROLE_UNSPECIFIED || authenticated_role_ == role;
  }

 private:
  ReplySink* sink_;  // Outlives every Responder (the transport outlives its handlers' work).
  std::string routing_id_;
  std::string reply_route_;  // empty: routing_id_
  proto::Role authenticated_role_;
  proto::Header request_;  // Only type, request_id and key are kept.
};

// Protocol logic of one process. Every method runs on the transport's I/O thread, one call at
// a time, so implementations need no locking for state only these methods touch.
class RequestHandler {
 public:
  virtual ~RequestHandler() = default;
  // A structurally valid request (DecodeFrames passed). Must eventually answer `responder`.
  virtual void HandleRequest(Message request, Responder responder) = 0;
  // Called about every TransportOptions::tick_period, and at NextWakeup().
  virtual void OnTick(absl::Time /*now*/) {}
  // When the handler next needs OnTick, if sooner than the tick period (e.g. R2SP's slot gap).
  virtual absl::Time NextWakeup() { return absl::InfiniteFuture(); }
};

}  // namespace r2sp

#endif  // R2SP_COMMON_HANDLER_H_
