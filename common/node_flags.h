// The flags every server and worker takes to reach its job (--scheduler, --bind,
// --advertise_host, --heartbeat_ms, --register_timeout_s, --io_threads,
// --connections_per_peer), defined once for both binaries.
#ifndef R2SP_COMMON_NODE_FLAGS_H_
#define R2SP_COMMON_NODE_FLAGS_H_

#include "common/node_connection.h"

namespace r2sp {

// The connection those flags describe, for a node of `role` (with --auth=curve, its keys);
// exits with a clear error if a flag is out of range or the keys cannot be used.
NodeConnectionOptions ConnectionFromFlags(proto::Role role);

}  // namespace r2sp

#endif  // R2SP_COMMON_NODE_FLAGS_H_
