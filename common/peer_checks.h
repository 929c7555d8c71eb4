// Checks of a request's claimed sender, and the count and rate-limited log of refused requests,
// shared by the server (ServerHandler) and the scheduler (SchedulerCore).
#ifndef R2SP_COMMON_PEER_CHECKS_H_
#define R2SP_COMMON_PEER_CHECKS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/handler.h"
#include "common/log_limiter.h"

namespace r2sp {

// "server", "worker" or "node" (any other role), for logs and errors.
const char* RoleName(proto::Role role);

// How a receiver words two of the refusals (part of its protocol: peers and their tests see
// these words, which differ between the server and the scheduler).
struct PeerCheckWording {
  // PERMISSION_DENIED when the peer may not act as the role it claims (Responder::MayBe).
  absl::string_view wrong_key;
  // INVALID_ARGUMENT when no node of the role has the claimed rank; the rank follows it.
  absl::string_view unknown_rank;
};

// Whether a request claiming to come from node `rank` of `role` did: the peer may act as that
// role (with CURVE, it proved the role's key), a node has that rank (`registered_routing_id`
// is its registered connection; null: no such node), and the request came over that
// connection. PERMISSION_DENIED for a peer that is not who it claims, INVALID_ARGUMENT for an
// unknown rank.
absl::Status CheckPeerConnection(const Responder& responder, proto::Role role, int rank,
                                 const std::string* registered_routing_id,
                                 const PeerCheckWording& wording);

// Counts the requests a receiver refuses and logs them, at most one line per period (a peer
// can send bad requests at will). Not thread-safe: guard it with the caller's lock.
class RequestRefusals {
 public:
  // `verb` names a refusal in the log ("rejected", "denied").
  explicit RequestRefusals(std::string verb, absl::Duration log_period = absl::Seconds(1));

  // Counts the refusal at `now`, logs it unless a line was logged within the period, and
  // answers `responder` with `status`. REQUIRES: !status.ok().
  void Refuse(Responder& responder, const absl::Status& status, absl::Time now);

  uint64_t count() const { return count_; }

 private:
  const std::string verb_;
  LogLimiter log_;
  uint64_t count_ = 0;
};

}  // namespace r2sp

#endif  // R2SP_COMMON_PEER_CHECKS_H_
