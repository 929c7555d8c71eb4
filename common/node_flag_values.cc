// See node_flag_values.h.
#include "common/node_flag_values.h"

#include <memory>
#include <utility>

#include "absl/time/time.h"
#include "common/auth/auth_options.h"
#include "common/status_macros.h"

namespace r2sp {

absl::StatusOr<NodeConnectionOptions> NodeConnectionFromValues(const NodeFlagValues& values,
                                                               proto::Role role) {
  NodeConnectionOptions options;
  options.scheduler = values.scheduler;
  options.bind = values.bind;
  options.advertise_host = values.advertise_host;
  options.heartbeat_period = absl::Milliseconds(values.heartbeat_ms);
  options.register_timeout = absl::Seconds(values.register_wait_s);
  options.scheduler_timeout = absl::Seconds(values.scheduler_timeout_s);
  options.io_threads = values.io_threads;
  options.connections_per_peer = values.connections_per_peer;
  AuthOptions auth;
  auth.auth = values.auth;
  auth.keys_dir = values.keys_dir;
  R2SP_ASSIGN_OR_RETURN(options.curve, LoadAuthKeys(auth, role));
  return options;
}

}  // namespace r2sp
