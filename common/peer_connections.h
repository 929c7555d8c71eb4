// The connections a transport's requests go out on: per peer endpoint, up to
// connections_per_peer DEALERs, each carrying the transport's routing id with its connection
// number (".K"), pinned to a libzmq I/O thread and opened in turn (the next once the newest
// has answered); with CURVE, each authenticates the peer by the key of the role it was said to
// have (ExpectPeer). Also the mapping from a routing id back to its process.
#ifndef R2SP_COMMON_PEER_CONNECTIONS_H_
#define R2SP_COMMON_PEER_CONNECTIONS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/auth/curve_keys.h"
#include "proto/messages.pb.h"
#include "zmq.hpp"

namespace r2sp {

// Connection k's routing id ends in ".K" (1 or 2 digits).
inline constexpr int kMaxConnectionsPerPeer = 99;

// 32 random hex digits: a transport's routing id (never starting with a zero byte, which
// libzmq reserves for the ids it makes up).
std::string NewRoutingId();

// The routing id of `routing_id`'s connection `k` (0: `routing_id` itself), and back: the
// sending process of a routing id a request arrived with (a prefix of it, or all of it).
std::string ConnectionRoutingId(const std::string& routing_id, int k);
absl::string_view ProcessOfRoutingId(absl::string_view routing_id);

struct PeerConnectionsOptions {
  // This process's routing id; connection k carries ConnectionRoutingId(routing_id, k).
  std::string routing_id;
  // REQUIRES: in [1, kMaxConnectionsPerPeer].
  int connections_per_peer = 1;
  // The context's I/O threads: connection k is pinned to thread k mod zmq_io_threads.
  // REQUIRES: >= 1.
  int zmq_io_threads = 1;
  int queue_messages = 64;                       // ZMQ_RCVHWM of each DEALER
  int64_t max_frame_bytes = int64_t{256} << 20;  // ZMQ_MAXMSGSIZE
  int linger_ms = 2000;                          // to flush queued requests when closing
  std::shared_ptr<const JobKeys> curve;          // null: plain TCP
};

// Thread-safety: ExpectPeer may be called from any thread; everything else only from the
// thread that owns the sockets (the transport's I/O thread).
class PeerConnections {
 public:
  // `context` must outlive this object (whose sockets close before it).
  PeerConnections(zmq::context_t& context, PeerConnectionsOptions options);

  PeerConnections(const PeerConnections&) = delete;
  PeerConnections& operator=(const PeerConnections&) = delete;

  // Requests to `peer` go to a node of `role` (with CURVE, authenticated by that role's key).
  void ExpectPeer(const std::string& peer, proto::Role role) ABSL_LOCKS_EXCLUDED(mu_);

  // Which connection to `peer` a request with `header` goes on: pushes and pulls by partition
  // key among those open so far, everything else the first.
  int ConnectionFor(const std::string& peer, const proto::Header& header) const;

  // A reply came on connection `k` to `peer`: if it is the newest open, the next may open.
  void Answered(const std::string& peer, int k);

  // DEALER `k` connected to `peer`, made on first use. FailedPrecondition with CURVE when
  // `peer`'s role is not known; Unavailable when libzmq refuses the endpoint.
  absl::StatusOr<zmq::socket_t*> DealerFor(const std::string& peer, int k) ABSL_LOCKS_EXCLUDED(mu_);

  // Closes every connection to `peer`, dropping what they have not delivered; the next request
  // to it opens connection 0 afresh. Returns how many sockets were closed.
  int Close(const std::string& peer);

  // Every open DEALER, for polling; changes with DealerFor and Close.
  const std::vector<zmq::socket_t*>& sockets() const { return sockets_; }

  // How many connections to `peer` requests may use now (1 until the first answers).
  int open_connections(const std::string& peer) const;

 private:
  // The CURVE server key for `peer`, or null without CURVE.
  absl::StatusOr<const std::string*> ServerKeyFor(const std::string& peer) const
      ABSL_LOCKS_EXCLUDED(mu_);

  zmq::context_t& context_;
  const PeerConnectionsOptions options_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, proto::Role> roles_ ABSL_GUARDED_BY(mu_);  // by endpoint

  // By peer endpoint: connection k at [k] (null until first used), and how many of them
  // requests may use (absent: 1).
  absl::flat_hash_map<std::string, std::vector<std::unique_ptr<zmq::socket_t>>> dealers_;
  absl::flat_hash_map<std::string, int> open_;
  std::vector<zmq::socket_t*> sockets_;
};

}  // namespace r2sp

#endif  // R2SP_COMMON_PEER_CONNECTIONS_H_
