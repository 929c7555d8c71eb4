// ZeroMQ transport: one ROUTER bound for requests received (replies go back on it) and one
// DEALER per peer for requests sent (or several: connections_per_peer), all owned by a single
// I/O thread. Every DEALER connects with the transport's own random routing id (a further
// connection to the same peer with ".K" after it), which is how peers tell its requests apart
// (the scheduler binds it to a rank at registration; a receiver strips the ".K"). With CURVE keys
// every connection is encrypted and the ROUTER admits only peers holding one of the job's keys,
// whose role each request then carries (Responder::authenticated_role).
// The transport runs the I/O thread and moves messages; the state it keeps belongs to classes
// of its own: RequestTracker (request_tracker.h: requests sent, their deadlines and callbacks),
// PeerConnections (peer_connections.h: the DEALERs to each peer, their keys and rollout),
// InboundLimit (inbound_limit.h: requests received per peer, bounded), and the ROUTER's setup
// is router_socket.h's.
#ifndef R2SP_COMMON_TRANSPORT_H_
#define R2SP_COMMON_TRANSPORT_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/auth/curve_keys.h"
#include "common/auth/zap_handler.h"
#include "common/handler.h"
#include "common/inbound_limit.h"
#include "common/log_limiter.h"
#include "common/loop_wakeups.h"
#include "common/message.h"
#include "common/peer_connections.h"
#include "common/request_tracker.h"
#include "zmq.hpp"

namespace r2sp {

struct TransportOptions {
  // Where the ROUTER binds. A '*' port picks a free one; endpoint() tells which.
  std::string bind_endpoint = "tcp://127.0.0.1:*";
  // If set, the host other processes should use to reach us (bind_endpoint may be 0.0.0.0).
  std::string advertise_host;
  // libzmq drops (and disconnects) a peer that sends a larger frame (ZMQ_MAXMSGSIZE).
  int64_t max_frame_bytes = int64_t{256} << 20;
  DecodeLimits decode_limits;
  // Whole messages libzmq queues per connection, each way, before it stops reading that peer's
  // socket (TCP then pushes back on that peer alone) or, for replies a peer does not read,
  // drops them. With max_frame_bytes and decode_limits this bounds the memory one peer holds.
  int queue_messages = 64;
  // Requests one peer may have outstanding (received, not yet answered: parked pulls, waits at
  // a barrier). Beyond it a request gets NOT_READY at once and never reaches the handler.
  int max_outstanding_per_peer = 1024;
  // CURVE (--auth=curve): this process's role keys and the job's public keys. Null: plain TCP.
  std::shared_ptr<const JobKeys> curve;
  // How often RequestHandler::OnTick runs and request deadlines are checked.
  absl::Duration tick_period = absl::Milliseconds(50);
  // A request unanswered this long is logged (a warning per peer: what the oldest asked, how
  // long ago, when its deadline fails it), once: a hang names what it waits for. Zero: never.
  absl::Duration warn_unanswered = absl::Seconds(30);
  // libzmq's I/O threads: where CURVE seals and opens every message, one connection always on
  // the same thread. REQUIRES: >= 1.
  int zmq_io_threads = 1;
  // Connections to each peer requests go on: pushes and pulls pick one by partition key,
  // everything else takes the first. With more than one I/O thread at both ends, one peer's
  // CURVE work spreads over them: connection k is served by I/O thread k mod zmq_io_threads
  // here, and the peer's libzmq gives a new connection its least loaded I/O thread, so they
  // open one at a time, each once the one before has answered (until then its keys use the
  // newest open one). REQUIRES: in [1, kMaxConnectionsPerPeer].
  int connections_per_peer = 1;
  // The ZeroMQ context its sockets live in, shared with other transports of this process (one
  // context per process, as ZeroMQ advises: threads of synthetic workers share its I/O threads,
  // which zmq_io_threads must then count). Null: a context of its own. REQUIRES: null with
  // curve (a context has one ZAP handler, and each transport keeps its own).
  std::shared_ptr<zmq::context_t> context;
};

struct TransportCounters {
  uint64_t requests_received = 0;  // InboundLimit's count
  uint64_t replies_received = 0;
  uint64_t payload_bytes_received = 0;
  uint64_t payload_bytes_sent = 0;
  uint64_t dropped_messages = 0;  // undecodable, unexpected or stale messages
  uint64_t timed_out_requests = 0;  // RequestTracker's count
  uint64_t refused_requests = 0;   // over max_outstanding_per_peer
  uint64_t refused_connections = 0;  // CURVE: peers without one of the job's keys
};

// Thread-safety: Request, SendReply, ExpectPeer, ResetPeer, Call and counters may be called
// from any thread. The handler and reply callbacks run on the internal I/O thread.
class Transport : public ReplySink, public Requester {
 public:
  static absl::StatusOr<std::unique_ptr<Transport>> Create(const TransportOptions& options);
  // Stops the I/O thread; pending requests complete with Cancelled.
  ~Transport() override;

  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // Starts serving. `handler` (may be null for a pure client, whose incoming requests get
  // NOT_READY) must outlive the transport or the next Stop().
  void Start(RequestHandler* handler);

  // Installs (or replaces) the handler while running, e.g. once registration has told a
  // server what it holds. `handler` must outlive the transport or the next Stop().
  void SetHandler(RequestHandler* handler) { handler_.store(handler); }

  // Sends everything queued, then stops the I/O thread. Pending requests get Cancelled.
  // Idempotent.
  void Stop();

  // The endpoint peers should connect to, e.g. "tcp://127.0.0.1:40123".
  const std::string& endpoint() const { return endpoint_; }

  const std::string& RoutingId() const override { return routing_id_; }
  void ExpectPeer(const std::string& peer_endpoint, proto::Role role) override;
  void Request(const std::string& peer_endpoint, Message request, absl::Duration timeout,
               ReplyCallback callback) override;
  void SendReply(const std::string& routing_id, Message reply) override;
  void ResetPeer(const std::string& peer_endpoint, const std::string& why) override;

  // Blocking request. REQUIRES: not called on the I/O thread.
  absl::StatusOr<Message> Call(const std::string& peer_endpoint, Message request,
                               absl::Duration timeout);

  TransportCounters counters() const;

 private:
  struct Outgoing {
    bool is_reply;
    std::string destination;  // routing id (replies) or peer endpoint (requests)
    Message message;
    absl::Time deadline;
    ReplyCallback callback;
  };

  static constexpr int kLingerMs = 2000;  // flush queued messages when closing

  explicit Transport(const TransportOptions& options);
  absl::Status Bind();
  void Enqueue(Outgoing item);
  // A reply of the transport's own (not a handler's): no outstanding request to settle.
  void ReplyFromTransport(const std::string& routing_id, proto::ErrorCode code,
                          const std::string& why, const proto::Header* request);
  // The role the peer that sent `frame` authenticated as (CURVE), else ROLE_UNSPECIFIED.
  proto::Role AuthenticatedRole(zmq::message_t& frame) const;
  void Loop();
  void DrainOutbox();
  void SendOne(Outgoing& item);
  void SendFrames(zmq::socket_t& socket, Message& message, const std::string* routing_id);
  void ReceiveFromRouter();
  void ReceiveFromDealer(zmq::socket_t& dealer);
  // Carries out the ResetPeer calls queued (between polls: the polled sockets may shrink).
  void ApplyResets();
  // Wakes the I/O thread from its poll.
  void Wake() {
    if (wakeups_ != nullptr) wakeups_->Wake();  // null only if Bind failed
  }
  void Drop(const std::string& why);

  const TransportOptions options_;
  const std::string routing_id_;  // random; every DEALER's
  std::shared_ptr<zmq::context_t> context_;  // outlives the sockets below
  std::unique_ptr<ZapHandler> zap_;  // with CURVE; closed before the context
  zmq::socket_t router_;
  std::string endpoint_;
  std::unique_ptr<LoopWakeups> wakeups_;  // eventfd (Wake) and timerfd (ticks); set by Bind
  std::thread thread_;
  std::atomic<std::thread::id> io_thread_{};  // thread_'s id, once it runs
  std::atomic<RequestHandler*> handler_{nullptr};
  std::atomic<bool> stopping_{false};
  bool started_ = false;
  InboundLimit inbound_;  // thread-safe

  mutable absl::Mutex mu_;
  std::deque<Outgoing> outbox_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;  // the I/O thread has exited
  TransportCounters counters_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, std::string>> resets_ ABSL_GUARDED_BY(mu_);  // peer, why
  LogLimiter drop_log_ ABSL_GUARDED_BY(mu_);

  // Sockets close before the context: declared after it. ExpectPeer is thread-safe; the rest
  // of peers_, and tracker_, only the I/O thread touches.
  PeerConnections peers_;
  RequestTracker tracker_;
};

}  // namespace r2sp

#endif  // R2SP_COMMON_TRANSPORT_H_
