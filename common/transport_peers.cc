// Transport (transport.h): what it knows and bounds about its peers. The DEALERs to each peer
// (one per connection, each with the transport's routing id and connection number, pinned to
// an I/O thread, opened in turn; with CURVE, the peer's role key), the routing ids' mapping to
// processes, the roles peers were said to have, the requests each peer has outstanding, the
// replies the transport sends on its own, the role a CURVE peer proved, and rate-limited drop
// warnings.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/transport.h"
#include "glog/logging.h"

namespace r2sp {

std::string ConnectionRoutingId(const std::string& routing_id, int k) {
  return k == 0 ? routing_id : absl::StrCat(routing_id, ".", k);
}

absl::string_view ProcessOfRoutingId(absl::string_view routing_id) {
  const size_t dot = routing_id.rfind('.');
  if (dot == absl::string_view::npos || dot == 0) return routing_id;
  const absl::string_view k = routing_id.substr(dot + 1);
  const bool connection = !k.empty() && k.size() <= 2 && k[0] != '0' &&
                          std::all_of(k.begin(), k.end(), absl::ascii_isdigit);
  return connection ? routing_id.substr(0, dot) : routing_id;
}

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
    auto dealers = dealers_.find(peer);
    if (dealers != dealers_.end()) {
      for (std::unique_ptr<zmq::socket_t>& dealer : dealers->second) {
        if (dealer == nullptr) continue;
        dealer->set(zmq::sockopt::linger, 0);  // what was not delivered never will be
        dealer_list_.erase(std::find(dealer_list_.begin(), dealer_list_.end(), dealer.get()));
      }
      dealers_.erase(dealers);  // closes them
    }
    open_connections_.erase(peer);
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

bool Transport::TakeOutstanding(absl::string_view peer) {
  absl::MutexLock lock(&mu_);
  int& n = outstanding_[peer];
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

int Transport::ConnectionFor(const std::string& peer, const proto::Header& header) const {
  const bool keyed = header.type() == proto::PUSH || header.type() == proto::PULL;
  if (!keyed || options_.connections_per_peer == 1) return 0;
  const int k = static_cast<int>(header.key() % options_.connections_per_peer);
  auto open = open_connections_.find(peer);
  return std::min(k, open == open_connections_.end() ? 0 : open->second - 1);
}

void Transport::ConnectionAnswered(const std::string& peer, int k) {
  if (options_.connections_per_peer == 1) return;
  int& open = open_connections_.try_emplace(peer, 1).first->second;
  if (k == open - 1 && open < options_.connections_per_peer) ++open;
}

absl::StatusOr<zmq::socket_t*> Transport::DealerFor(const std::string& peer, int k) {
  auto [entry, first] = dealers_.try_emplace(peer);
  std::vector<std::unique_ptr<zmq::socket_t>>& connections = entry->second;
  if (first) connections.resize(options_.connections_per_peer);
  if (connections[k] != nullptr) return connections[k].get();
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
    dealer->set(zmq::sockopt::routing_id, ConnectionRoutingId(routing_id_, k));
    // Connection k on I/O thread k (mod their number): set before connecting.
    dealer->set(zmq::sockopt::affinity, uint64_t{1} << (k % std::min(options_.zmq_io_threads, 64)));
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
  connections[k] = std::move(dealer);
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
