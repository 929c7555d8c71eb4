// The node flags' one definition (see node_flags.h) and their reading.
#include "common/node_flags.h"

#include "common/node_flag_values.h"
#include "gflags/gflags.h"
#include "glog/logging.h"

DEFINE_string(scheduler, "tcp://127.0.0.1:9000", "the scheduler's endpoint");
DEFINE_string(bind, "tcp://0.0.0.0:*", "ZeroMQ endpoint to listen on (* = any free port)");
DEFINE_string(advertise_host, "", "host name or address the other nodes reach us at");
DEFINE_int32(heartbeat_ms, 1000, "heartbeat period; the scheduler refuses a node unless two "
             "periods fit in its --heartbeat_timeout_ms");
DEFINE_int32(register_wait_s, 60, "give up if the scheduler does not answer this node's "
             "registration in this time");
DEFINE_int32(register_timeout_s, 60, "DEPRECATED alias of --register_wait_s (the scheduler's "
             "--register_timeout_s is the whole job's registration)");
DEFINE_int32(io_threads, 0, "ZeroMQ I/O threads, which seal and open CURVE messages (0: 1, or "
             "2 with --auth=curve)");
DEFINE_int32(connections_per_peer, 0, "connections to each peer, pushes and pulls spread over "
             "them by partition so that CURVE's work on one peer's traffic uses several I/O "
             "threads (0: 1, or --io_threads with --auth=curve)");
DEFINE_double(scheduler_timeout_s, 9, "stop (status 3) once the scheduler has answered no "
              "heartbeat for this long (servers write a checkpoint first)");
DEFINE_string(auth, "none", "none, or curve: CurveZMQ encryption and authentication with the "
              "job's keys (tools/keygen; docs/SECURITY.md)");
DEFINE_string(keys_dir, "", "with --auth=curve: the directory of the job's keys (default: "
              "$R2SP_KEYS_DIR)");

namespace r2sp {
namespace {

// --register_wait_s, or the deprecated --register_timeout_s if only that one was given.
int RegisterWaitSecondsFromFlags() {
  if (gflags::GetCommandLineFlagInfoOrDie("register_timeout_s").is_default) {
    return FLAGS_register_wait_s;
  }
  if (!gflags::GetCommandLineFlagInfoOrDie("register_wait_s").is_default) {
    LOG(WARNING) << "--register_timeout_s is deprecated and ignored beside --register_wait_s";
    return FLAGS_register_wait_s;
  }
  LOG(WARNING) << "--register_timeout_s is deprecated for servers and workers: use "
                  "--register_wait_s (the scheduler's --register_timeout_s is another thing)";
  return FLAGS_register_timeout_s;
}

}  // namespace

absl::StatusOr<NodeConnectionOptions> ConnectionFromFlags(proto::Role role) {
  NodeFlagValues values;
  values.scheduler = FLAGS_scheduler;
  values.bind = FLAGS_bind;
  values.advertise_host = FLAGS_advertise_host;
  values.heartbeat_ms = FLAGS_heartbeat_ms;
  values.register_wait_s = RegisterWaitSecondsFromFlags();
  values.io_threads = FLAGS_io_threads;
  values.connections_per_peer = FLAGS_connections_per_peer;
  values.scheduler_timeout_s = FLAGS_scheduler_timeout_s;
  values.auth = FLAGS_auth;
  values.keys_dir = FLAGS_keys_dir;
  return NodeConnectionFromValues(values, role);
}

}  // namespace r2sp
