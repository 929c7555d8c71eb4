// Transport (transport.h): what it knows and bounds about its peers. The DEALER to each peer
// (with the transport's routing id and, with CURVE, the peer's role key), the roles peers were
// said to have, the requests each peer has outstanding, the replies the transport sends on its
// own, the role a CURVE peer proved, and rate-limited drop warnings.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/transport.h"
#include "glog/logging.h"

namespace r2sp {

void Transport::ExpectPeer(const std::string& peer_endpoint, proto::Role role) {
  absl::MutexLock lock(&mu_);
  peer_roles_[peer_endpoint] = role;
}

void Transport::ResetPeer(const std::string& peer_endpoint, const std::string& why) {
  {
    absl::MutexLock lock(&mu_);
    resets_.emplace_back(peer_endpoint, why);
  }
  Wake();
}

void Transport::ApplyResets() {
  std::vector<std::pair<std::string, std::string>> resets;
  {
    absl::MutexLock lock(&mu_);
    resets.swap(resets_);
  }
  for (const auto& [peer, why] : resets) {
    auto dealer = dealers_.find(peer);
    if (dealer != dealers_.end()) {
      dealer->second->set(zmq::sockopt::linger, 0);  // what was not delivered never will be
      dealer_list_.erase(std::find(dealer_list_.begin(), dealer_list_.end(),
                                   dealer->second.get()));
      dealers_.erase(dealer);  // closes it
    }
    std::vector<ReplyCallback> failed;
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second.peer == peer) {
        failed.push_back(std::move(it->second.callback));
        pending_.erase(it++);
      } else {
        ++it;
      }
    }
    LOG(WARNING) << "connection to " << peer << " reset (" << why << "); " << failed.size()
                 << " requests to it failed";
    for (ReplyCallback& callback : failed) {
      callback(absl::UnavailableError(absl::StrCat(peer, " was lost: ", why)));
    }
  }
}

void Transport::ReplyFromTransport(const std::string& routing_id, proto::ErrorCode code,
                                   const std::string& why, const proto::Header* request) {
  proto::Header error;
  if (request != nullptr) {
    error = ReplyHeaderFor(*request, absl::OkStatus());
  } else {
    error.set_type(proto::ERROR);
    error.set_is_reply(true);
  }
  error.set_code(code);
  error.set_error(why);
  Enqueue(Outgoing{true, routing_id, Message{std::move(error), {}}, absl::InfiniteFuture(),
                   nullptr});
}

bool Transport::TakeOutstanding(const std::string& routing_id) {
  absl::MutexLock lock(&mu_);
  int& n = outstanding_[routing_id];
  if (n >= options_.max_outstanding_per_peer) {
    ++counters_.refused_requests;
    return false;
  }
  ++n;
  ++counters_.requests_received;
  return true;
}

proto::Role Transport::AuthenticatedRole(zmq::message_t& frame) const {
  if (options_.curve == nullptr) return proto::ROLE_UNSPECIFIED;
  const char* user = zmq_msg_gets(frame.handle(), "User-Id");
  return user != nullptr ? RoleFromKeyName(user) : proto::ROLE_UNSPECIFIED;
}

absl::StatusOr<zmq::socket_t*> Transport::DealerFor(const std::string& peer) {
  auto it = dealers_.find(peer);
  if (it != dealers_.end()) return it->second.get();
  const std::string* server_key = nullptr;
  if (options_.curve != nullptr) {
    proto::Role role = proto::ROLE_UNSPECIFIED;
    {
      absl::MutexLock lock(&mu_);
      auto known = peer_roles_.find(peer);
      if (known != peer_roles_.end()) role = known->second;
    }
    auto key = options_.curve->public_keys.find(role);
    if (key == options_.curve->public_keys.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "no CURVE key to authenticate ", peer, " by: its role is not known (ExpectPeer)"));
    }
    server_key = &key->second;
  }
  auto dealer = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::dealer);
  try {
    dealer->set(zmq::sockopt::linger, kLingerMs);
    dealer->set(zmq::sockopt::sndhwm, 0);
    dealer->set(zmq::sockopt::rcvhwm, options_.queue_messages);
    dealer->set(zmq::sockopt::maxmsgsize, options_.max_frame_bytes);
    dealer->set(zmq::sockopt::routing_id, routing_id_);
    if (server_key != nullptr) {
      dealer->set(zmq::sockopt::curve_serverkey, *server_key);
      dealer->set(zmq::sockopt::curve_publickey, options_.curve->public_key);
      dealer->set(zmq::sockopt::curve_secretkey, options_.curve->secret_key);
    }
    dealer->connect(peer);
  } catch (const zmq::error_t& e) {
    return absl::UnavailableError(absl::StrCat("cannot connect to ", peer, ": ", e.what()));
  }
  zmq::socket_t* socket = dealer.get();
  dealer_list_.push_back(socket);
  dealers_.emplace(peer, std::move(dealer));
  return socket;
}

void Transport::Drop(const std::string& why) {
  absl::MutexLock lock(&mu_);
  ++counters_.dropped_messages;
  int64_t suppressed = 0;
  if (drop_log_.ShouldLog(absl::Now(), &suppressed)) {
    LOG(WARNING) << "dropped message: " << why << " (" << suppressed
                 << " more dropped or refused since the last report)";
  }
}

}  // namespace r2sp
