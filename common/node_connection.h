// How a server or a worker reaches its job: its own transport (bound, started without a
// handler, so requests get NOT_READY until one is installed) and a client of the scheduler that
// registers with the endpoint the transport advertises; the options of both, checked by
// Validate().
#ifndef R2SP_COMMON_NODE_CONNECTION_H_
#define R2SP_COMMON_NODE_CONNECTION_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/scheduler_client.h"
#include "common/transport.h"

namespace r2sp {

struct NodeConnectionOptions {
  std::string scheduler = "tcp://127.0.0.1:9000";  // --scheduler. REQUIRES: non-empty
  std::string bind = "tcp://0.0.0.0:*";             // --bind
  std::string advertise_host;  // empty: the bound address (127.0.0.1 for 0.0.0.0)
  // --register_wait_s: give up when the scheduler has not answered this node's registration
  // in this time. REQUIRES: >= 1 s.
  absl::Duration register_timeout = absl::Seconds(60);
  // --heartbeat_ms. REQUIRES: >= 10 ms; the scheduler refuses a node whose period cannot meet
  // its heartbeat timeout (scheduler/scheduler_options.h, CheckHeartbeatPeriod).
  absl::Duration heartbeat_period = absl::Seconds(1);
  // --scheduler_timeout_s; see SchedulerClientOptions. REQUIRES: > heartbeat_period.
  absl::Duration scheduler_timeout = absl::Seconds(9);
  std::shared_ptr<const JobKeys> curve;  // see TransportOptions
  // --io_threads: TransportOptions::zmq_io_threads; 0: 1, or 2 with curve. REQUIRES: >= 0.
  int io_threads = 0;
  // --connections_per_peer: see TransportOptions; 0: 1, or io_threads with curve. REQUIRES:
  // in [0, kMaxConnectionsPerPeer].
  int connections_per_peer = 0;
  // TransportOptions::context: a ZeroMQ context shared with the process's other nodes (threads
  // of synthetic workers); null: the transport's own. REQUIRES: null with curve.
  std::shared_ptr<zmq::context_t> zmq_context;

  // OK, or InvalidArgument naming the first field (and its flag) that breaks a REQUIRES.
  absl::Status Validate() const;
};

struct NodeConnection {
  std::unique_ptr<Transport> transport;
  std::unique_ptr<SchedulerClient> scheduler;  // uses `transport`; declared after it
};

// The ZeroMQ I/O threads a node with `options` runs: io_threads, or by default 1 (2 with curve).
int IoThreadsOf(const NodeConnectionOptions& options);

// Binds and starts the transport and makes the scheduler client (not yet registered); the
// error of options.Validate() first.
absl::StatusOr<NodeConnection> ConnectNode(const NodeConnectionOptions& options);

}  // namespace r2sp

#endif  // R2SP_COMMON_NODE_CONNECTION_H_
