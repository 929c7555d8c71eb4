// The ZAP handler (ZeroMQ RFC 27) that makes a transport's CURVE fail closed: it accepts a
// CURVE peer only if its public key is one of the job's, and names its role as the ZAP user id,
// which every message from that peer then carries ("User-Id" metadata). A NULL or PLAIN peer,
// or a CURVE peer with any other key, is refused before it reaches a handler. (Without a ZAP
// handler, libzmq's CURVE server accepts every client key.)
#ifndef R2SP_COMMON_AUTH_ZAP_HANDLER_H_
#define R2SP_COMMON_AUTH_ZAP_HANDLER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/auth/curve_keys.h"
#include "zmq.hpp"

namespace r2sp {

class ZapHandler {
 public:
  // Binds the ZAP endpoint in `context` (which must outlive this) and starts answering, with
  // `keys`' three public keys as the allowlist. Start it before any CURVE socket binds.
  static absl::StatusOr<std::unique_ptr<ZapHandler>> Start(zmq::context_t& context,
                                                            const JobKeys& keys);
  // Stops the thread and closes the socket (before the context is closed).
  ~ZapHandler();

  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  uint64_t accepted() const { return accepted_.load(); }
  uint64_t refused() const { return refused_.load(); }

 private:
  ZapHandler(zmq::context_t& context, const JobKeys& keys);
  void Loop();
  // The reply's status code, and the user id (role name) when it is "200".
  std::pair<std::string, std::string> Decide(const std::vector<zmq::message_t>& request);

  zmq::socket_t socket_;
  absl::flat_hash_map<std::string, std::string> allowed_;  // binary key -> role name
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> accepted_{0};
  std::atomic<uint64_t> refused_{0};
  std::thread thread_;
};

}  // namespace r2sp

#endif  // R2SP_COMMON_AUTH_ZAP_HANDLER_H_
