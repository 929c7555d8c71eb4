// The ROUTER a transport receives requests on; see router_socket.h.
#include "common/router_socket.h"

#include "absl/strings/str_cat.h"

namespace r2sp {

std::string WithHost(const std::string& endpoint, const std::string& host) {
  const size_t scheme = endpoint.find("://");
  const size_t colon = endpoint.rfind(':');
  if (scheme == std::string::npos || colon == std::string::npos || colon < scheme + 3) {
    return endpoint;
  }
  return absl::StrCat(endpoint.substr(0, scheme + 3), host, endpoint.substr(colon));
}

absl::StatusOr<std::string> BindRouter(zmq::socket_t& router, const RouterSocketOptions& options) {
  std::string endpoint;
  try {
    router.set(zmq::sockopt::linger, options.linger_ms);
    router.set(zmq::sockopt::sndhwm, options.send_queue);
    router.set(zmq::sockopt::rcvhwm, options.receive_queue);
    router.set(zmq::sockopt::maxmsgsize, options.max_frame_bytes);
    // A peer that reconnects (it reset its connection, or its old one was to the process this
    // one replaced) may arrive before its old connection's close is noticed here: its new
    // connection takes the routing id over. Without this the ROUTER ignores the newcomer as a
    // duplicate and the peer's requests go unanswered until they time out.
    router.set(zmq::sockopt::router_handover, true);
    if (options.curve != nullptr) {
      router.set(zmq::sockopt::curve_server, true);
      router.set(zmq::sockopt::curve_secretkey, options.curve->secret_key);
      router.set(zmq::sockopt::zap_domain, options.zap_domain);
    }
    router.bind(options.bind_endpoint);
    endpoint = router.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot bind ", options.bind_endpoint, ": ", e.what()));
  }
  if (!options.advertise_host.empty()) return WithHost(endpoint, options.advertise_host);
  if (endpoint.find("://0.0.0.0:") != std::string::npos) return WithHost(endpoint, "127.0.0.1");
  return endpoint;
}

}  // namespace r2sp
