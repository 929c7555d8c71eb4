// The values a server or a worker is given to reach its job (the node flags --scheduler,
// --bind, ..., --auth, --keys_dir, or the same options from a map: worker/session_option_map.h)
// and the NodeConnectionOptions they make, so that every way of giving them means the same.
#ifndef R2SP_COMMON_NODE_FLAG_VALUES_H_
#define R2SP_COMMON_NODE_FLAG_VALUES_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/node_connection.h"
#include "proto/messages.pb.h"

namespace r2sp {

// One field per node flag, in the flag's own unit. The caller sets every field (from the
// flags, or from the map, each with the flags' defaults).
struct NodeFlagValues {
  std::string scheduler;
  std::string bind;
  std::string advertise_host;
  int heartbeat_ms = 0;
  int register_wait_s = 0;
  int io_threads = 0;
  int connections_per_peer = 0;
  double scheduler_timeout_s = 0;
  std::string auth;      // none or curve
  std::string keys_dir;  // curve: empty means $R2SP_KEYS_DIR
};

// The connection `values` describe for a node of `role`, with its keys (auth curve: loaded from
// keys_dir), or the error of loading them. Not validated: ConnectNode does that.
absl::StatusOr<NodeConnectionOptions> NodeConnectionFromValues(const NodeFlagValues& values,
                                                               proto::Role role);

}  // namespace r2sp

#endif  // R2SP_COMMON_NODE_FLAG_VALUES_H_
