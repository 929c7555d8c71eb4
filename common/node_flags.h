// The flags a server and a worker share to reach their job, read into NodeConnectionOptions.
// Included only by server/main.cc and worker/worker_flags.cc, which each define these flags
// (the server's in its main.cc; the worker's in the file its binary and the Python client
// share; the two blocks of DEFINE lines are the same text). This header declares them and reads them, so the reading is written once.
//
// --register_timeout_s meant "the whole job registered" in the scheduler and "the scheduler
// answered" in the nodes; the nodes' meaning is now --register_wait_s, and a node's
// --register_timeout_s is a deprecated alias of it that logs a warning.
#ifndef R2SP_COMMON_NODE_FLAGS_H_
#define R2SP_COMMON_NODE_FLAGS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/auth/auth_options.h"
#include "common/node_connection.h"
#include "gflags/gflags.h"
#include "glog/logging.h"

DECLARE_string(scheduler);
DECLARE_string(bind);
DECLARE_string(advertise_host);
DECLARE_int32(heartbeat_ms);
DECLARE_int32(register_wait_s);
DECLARE_int32(register_timeout_s);  // deprecated alias of --register_wait_s
DECLARE_int32(io_threads);
DECLARE_int32(connections_per_peer);
DECLARE_double(scheduler_timeout_s);
DECLARE_string(auth);
DECLARE_string(keys_dir);

namespace r2sp {

// --register_wait_s, or the deprecated --register_timeout_s if only that one was given.
inline int RegisterWaitSecondsFromFlags() {
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

// The connection the flags describe for a node of `role`, with its keys (--auth=curve); the
// error of loading the keys. Not validated: ConnectNode does that (NodeConnectionOptions).
inline absl::StatusOr<NodeConnectionOptions> ConnectionFromFlags(proto::Role role) {
  NodeConnectionOptions options;
  options.scheduler = FLAGS_scheduler;
  options.bind = FLAGS_bind;
  options.advertise_host = FLAGS_advertise_host;
  options.heartbeat_period = absl::Milliseconds(FLAGS_heartbeat_ms);
  options.register_timeout = absl::Seconds(RegisterWaitSecondsFromFlags());
  options.scheduler_timeout = absl::Seconds(FLAGS_scheduler_timeout_s);
  options.io_threads = FLAGS_io_threads;
  options.connections_per_peer = FLAGS_connections_per_peer;
  AuthOptions auth;
  auth.auth = FLAGS_auth;
  auth.keys_dir = FLAGS_keys_dir;
  absl::StatusOr<std::shared_ptr<const JobKeys>> keys = LoadAuthKeys(auth, role);
  if (!keys.ok()) return keys.status();
  options.curve = *std::move(keys);
  return options;
}

}  // namespace r2sp

#endif  // R2SP_COMMON_NODE_FLAGS_H_
