// The flags a server and a worker share to reach their job, defined once (node_flags.cc) for
// both binaries, and their reading into NodeConnectionOptions. Only binaries link this library
// (alwayslink): libraries take NodeConnectionOptions, or NodeFlagValues (node_flag_values.h).
//
// --register_timeout_s meant "the whole job registered" in the scheduler and "the scheduler
// answered" in the nodes; the nodes' meaning is now --register_wait_s, and a node's
// --register_timeout_s is a deprecated alias of it that logs a warning.
#ifndef R2SP_COMMON_NODE_FLAGS_H_
#define R2SP_COMMON_NODE_FLAGS_H_

#include "absl/status/statusor.h"
#include "common/node_connection.h"
#include "gflags/gflags.h"
#include "proto/messages.pb.h"

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

// The connection the flags describe for a node of `role`, with its keys (--auth=curve); the
// error of loading the keys. Not validated: ConnectNode does that (NodeConnectionOptions).
absl::StatusOr<NodeConnectionOptions> ConnectionFromFlags(proto::Role role);

}  // namespace r2sp

#endif  // R2SP_COMMON_NODE_FLAGS_H_
