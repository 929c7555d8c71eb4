// The ROUTER a transport receives requests on: its queue bounds, CURVE server setup and bind,
// and the endpoint other processes should use to reach it.
#ifndef R2SP_COMMON_ROUTER_SOCKET_H_
#define R2SP_COMMON_ROUTER_SOCKET_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/auth/curve_keys.h"
#include "zmq.hpp"

namespace r2sp {

struct RouterSocketOptions {
  std::string bind_endpoint;   // a '*' port picks a free one
  std::string advertise_host;  // if set, the host in the endpoint returned
  int linger_ms = 2000;
  int send_queue = 0;     // ZMQ_SNDHWM: replies queued per peer before they are dropped
  int receive_queue = 0;  // ZMQ_RCVHWM
  int64_t max_frame_bytes = 0;
  const JobKeys* curve = nullptr;  // CURVE server with these keys; null: plain TCP
  std::string zap_domain;          // with CURVE: the ZAP domain its handler serves
};

// Configures `router` and binds it. Returns the endpoint peers should connect to: the bound
// one with advertise_host (or, bound to 0.0.0.0, 127.0.0.1) as its host. InvalidArgument
// when the bind fails.
absl::StatusOr<std::string> BindRouter(zmq::socket_t& router, const RouterSocketOptions& options);

// "tcp://HOST:PORT" with `host` for HOST; any other shape unchanged.
std::string WithHost(const std::string& endpoint, const std::string& host);

}  // namespace r2sp

#endif  // R2SP_COMMON_ROUTER_SOCKET_H_
