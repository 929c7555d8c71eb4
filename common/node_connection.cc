// See node_connection.h.
#include "common/node_connection.h"

#include "absl/strings/str_cat.h"
#include "common/option_checker.h"
#include "common/status_macros.h"

namespace r2sp {

absl::Status NodeConnectionOptions::Validate() const {
  OptionChecker c("NodeConnectionOptions");
  c.Check(!scheduler.empty(), "--scheduler", "scheduler", "non-empty", scheduler);
  c.Check(heartbeat_period >= absl::Milliseconds(10), "--heartbeat_ms", "heartbeat_period",
          ">= 10ms", heartbeat_period);
  c.Check(register_timeout >= absl::Seconds(1), "--register_wait_s", "register_timeout",
          ">= 1s", register_timeout);
  c.Check(scheduler_timeout > heartbeat_period, "--scheduler_timeout_s", "scheduler_timeout",
          absl::StrCat("longer than one heartbeat period (",
                       absl::FormatDuration(heartbeat_period), ")"),
          scheduler_timeout);
  c.Check(io_threads >= 0, "--io_threads", "io_threads", ">= 0", io_threads);
  c.Check(connections_per_peer >= 0 && connections_per_peer <= kMaxConnectionsPerPeer,
          "--connections_per_peer", "connections_per_peer",
          absl::StrCat("in [0, ", kMaxConnectionsPerPeer, "]"), connections_per_peer);
  c.Require(zmq_context == nullptr || curve == nullptr, "--auth=curve", "zmq_context",
            "needs a ZeroMQ context per node (each has its own ZAP handler)");
  return c.status();
}

int IoThreadsOf(const NodeConnectionOptions& options) {
  return options.io_threads > 0 ? options.io_threads : options.curve != nullptr ? 2 : 1;
}

absl::StatusOr<NodeConnection> ConnectNode(const NodeConnectionOptions& options) {
  R2SP_RETURN_IF_ERROR(options.Validate());
  const bool curve = options.curve != nullptr;
  const int io_threads = IoThreadsOf(options);
  TransportOptions transport_options;
  transport_options.bind_endpoint = options.bind;
  transport_options.advertise_host = options.advertise_host;
  transport_options.curve = options.curve;
  transport_options.context = options.zmq_context;
  transport_options.zmq_io_threads = io_threads;
  transport_options.connections_per_peer = options.connections_per_peer > 0
                                               ? options.connections_per_peer
                                               : curve ? io_threads : 1;
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
