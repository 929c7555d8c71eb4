// See peer_checks.h.
#include "common/peer_checks.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace r2sp {

const char* RoleName(proto::Role role) {
  switch (role) {
    case proto::SERVER:
      return "server";
    case proto::WORKER:
      return "worker";
    default:
      return "node";
  }
}

absl::Status CheckPeerConnection(const Responder& responder, proto::Role role, int rank,
                                 const std::string* registered_routing_id,
                                 const PeerCheckWording& wording) {
  if (!responder.MayBe(role)) return absl::PermissionDeniedError(wording.wrong_key);
  if (registered_routing_id == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(wording.unknown_rank, rank));
  }
  if (*registered_routing_id != responder.routing_id()) {
    return absl::PermissionDeniedError(
        absl::StrCat("the request did not come over ", RoleName(role), " ", rank, "'s connection"));
  }
  return absl::OkStatus();
}

RequestRefusals::RequestRefusals(std::string verb, absl::Duration log_period)
    : verb_(std::move(verb)), log_(log_period) {}

void RequestRefusals::Refuse(Responder& responder, const absl::Status& status, absl::Time now) {
  DCHECK(!status.ok());
  ++count_;
  int64_t suppressed = 0;
  if (log_.ShouldLog(now, &suppressed)) {
    LOG(WARNING) << verb_ << " a request: " << status << " (" << suppressed << " more " << verb_
                 << " since the last report)";
  }
  responder.ReplyStatus(status);
}

}  // namespace r2sp
