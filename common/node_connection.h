// How a server or a worker reaches its job: its own transport (bound, started without a
// handler, so requests get NOT_READY until one is installed) and a client of the scheduler that
// registers with the endpoint the transport advertises.
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
  std::string scheduler = "tcp://127.0.0.1:9000";  // REQUIRES: non-empty
  std::string bind = "tcp://0.0.0.0:*";
  std::string advertise_host;  // empty: the bound address (127.0.0.1 for 0.0.0.0)
  absl::Duration register_timeout = absl::Seconds(60);
  absl::Duration heartbeat_period = absl::Seconds(1);
  absl::Duration scheduler_timeout = absl::Seconds(9);  // see SchedulerClientOptions
  std::shared_ptr<const JobKeys> curve;  // see TransportOptions
  int io_threads = 1;                    // TransportOptions::zmq_io_threads
  int connections_per_peer = 1;          // see TransportOptions
};

struct NodeConnection {
  std::unique_ptr<Transport> transport;
  std::unique_ptr<SchedulerClient> scheduler;  // uses `transport`; declared after it
};

// Binds and starts the transport and makes the scheduler client (not yet registered).
absl::StatusOr<NodeConnection> ConnectNode(const NodeConnectionOptions& options);

}  // namespace r2sp

#endif  // R2SP_COMMON_NODE_CONNECTION_H_
