// See node_flags.h.
#include "common/node_flags.h"

#include "absl/strings/str_cat.h"
#include "common/auth/auth_flags.h"
#include "common/cli.h"
#include "gflags/gflags.h"

DEFINE_string(scheduler, "tcp://127.0.0.1:9000", "the scheduler's endpoint");
DEFINE_string(bind, "tcp://0.0.0.0:*", "ZeroMQ endpoint to listen on (* = any free port)");
DEFINE_string(advertise_host, "", "host name or address the other nodes reach us at");
DEFINE_int32(heartbeat_ms, 1000, "heartbeat period");
DEFINE_int32(register_timeout_s, 60, "give up if the scheduler does not answer in this time");
DEFINE_int32(io_threads, 0, "ZeroMQ I/O threads, which seal and open CURVE messages (0: 1, or "
             "2 with --auth=curve)");
DEFINE_int32(connections_per_peer, 0, "connections to each peer, pushes and pulls spread over "
             "them by partition so that CURVE's work on one peer's traffic uses several I/O "
             "threads (0: 1, or --io_threads with --auth=curve)");
DEFINE_double(scheduler_timeout_s, 9, "stop (status 3) once the scheduler has answered no "
              "heartbeat for this long (servers write a checkpoint first)");

namespace r2sp {

NodeConnectionOptions ConnectionFromFlags(proto::Role role) {
  CheckFlag(!FLAGS_scheduler.empty(), "--scheduler must not be empty");
  CheckFlag(FLAGS_heartbeat_ms >= 10, "--heartbeat_ms must be >= 10");
  CheckFlag(FLAGS_register_timeout_s >= 1, "--register_timeout_s must be >= 1");
  CheckFlag(FLAGS_scheduler_timeout_s * 1000 > FLAGS_heartbeat_ms,
            "--scheduler_timeout_s must be longer than one heartbeat period");
  NodeConnectionOptions options;
  options.scheduler = FLAGS_scheduler;
  options.bind = FLAGS_bind;
  options.advertise_host = FLAGS_advertise_host;
  options.heartbeat_period = absl::Milliseconds(FLAGS_heartbeat_ms);
  options.register_timeout = absl::Seconds(FLAGS_register_timeout_s);
  options.scheduler_timeout = absl::Seconds(FLAGS_scheduler_timeout_s);
  options.curve = ValueOrExit(CurveKeysFromFlags(role));
  CheckFlag(FLAGS_io_threads >= 0, "--io_threads must be >= 0");
  CheckFlag(FLAGS_connections_per_peer >= 0 &&
                FLAGS_connections_per_peer <= kMaxConnectionsPerPeer,
            absl::StrCat("--connections_per_peer must be in [0, ", kMaxConnectionsPerPeer, "]"));
  const bool curve = options.curve != nullptr;
  options.io_threads = FLAGS_io_threads > 0 ? FLAGS_io_threads : curve ? 2 : 1;
  options.connections_per_peer = FLAGS_connections_per_peer > 0 ? FLAGS_connections_per_peer
                                 : curve                        ? options.io_threads
                                                                : 1;
  return options;
}

}  // namespace r2sp
