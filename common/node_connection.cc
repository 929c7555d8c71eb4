// See node_connection.h.
#include "common/node_connection.h"

#include "common/status_macros.h"

namespace r2sp {

absl::StatusOr<NodeConnection> ConnectNode(const NodeConnectionOptions& options) {
  TransportOptions transport_options;
  transport_options.bind_endpoint = options.bind;
  transport_options.advertise_host = options.advertise_host;
  transport_options.curve = options.curve;
  transport_options.zmq_io_threads = options.io_threads;
  transport_options.connections_per_peer = options.connections_per_peer;
  NodeConnection node;
  R2SP_ASSIGN_OR_RETURN(node.transport, Transport::Create(transport_options));
  node.transport->Start(nullptr);
  SchedulerClientOptions client_options;
  client_options.scheduler = options.scheduler;
  client_options.endpoint = node.transport->endpoint();
  client_options.register_timeout = options.register_timeout;
  client_options.heartbeat_period = options.heartbeat_period;
  client_options.scheduler_timeout = options.scheduler_timeout;
  node.scheduler = std::make_unique<SchedulerClient>(node.transport.get(), client_options);
  return node;
}

}  // namespace r2sp
