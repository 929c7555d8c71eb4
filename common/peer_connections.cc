// The connections a transport's requests go out on; see peer_connections.h.
#include "common/peer_connections.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace r2sp {

std::string NewRoutingId() {
  std::random_device rd;
  std::string id;
  for (int i = 0; i < 4; ++i) absl::StrAppend(&id, absl::Hex(rd(), absl::kZeroPad8));
  return id;
}

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

PeerConnections::PeerConnections(zmq::context_t& context, PeerConnectionsOptions options)
    : context_(context), options_(std::move(options)) {}

void PeerConnections::ExpectPeer(const std::string& peer, proto::Role role) {
  absl::MutexLock lock(&mu_);
  roles_[peer] = role;
}

int PeerConnections::ConnectionFor(const std::string& peer, const proto::Header& header) const {
  const bool keyed = header.type() == proto::PUSH || header.type() == proto::PULL;
  if (!keyed || options_.connections_per_peer == 1) return 0;
  const int k = static_cast<int>(header.key() % options_.connections_per_peer);
  return std::min(k, open_connections(peer) - 1);
}

int PeerConnections::open_connections(const std::string& peer) const {
  auto open = open_.find(peer);
  return open == open_.end() ? 1 : open->second;
}

void PeerConnections::Answered(const std::string& peer, int k) {
  if (options_.connections_per_peer == 1) return;
  int& open = open_.try_emplace(peer, 1).first->second;
  if (k == open - 1 && open < options_.connections_per_peer) ++open;
}

absl::StatusOr<const std::string*> PeerConnections::ServerKeyFor(const std::string& peer) const {
  if (options_.curve == nullptr) return nullptr;
  proto::Role role = proto::ROLE_UNSPECIFIED;
  {
    absl::MutexLock lock(&mu_);
    auto known = roles_.find(peer);
    if (known != roles_.end()) role = known->second;
  }
  auto key = options_.curve->public_keys.find(role);
  if (key == options_.curve->public_keys.end()) {
    return absl::FailedPreconditionError(absl::StrCat("no CURVE key to authenticate ", peer,
                                                      " by: its role is not known (ExpectPeer)"));
  }
  return &key->second;
}

absl::StatusOr<zmq::socket_t*> PeerConnections::DealerFor(const std::string& peer, int k) {
  auto [entry, first] = dealers_.try_emplace(peer);
  std::vector<std::unique_ptr<zmq::socket_t>>& connections = entry->second;
  if (first) connections.resize(options_.connections_per_peer);
  if (connections[k] != nullptr) return connections[k].get();
  absl::StatusOr<const std::string*> server_key = ServerKeyFor(peer);
  if (!server_key.ok()) return server_key.status();
  auto dealer = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::dealer);
  try {
    dealer->set(zmq::sockopt::linger, options_.linger_ms);
    dealer->set(zmq::sockopt::sndhwm, 0);
    dealer->set(zmq::sockopt::rcvhwm, options_.queue_messages);
    dealer->set(zmq::sockopt::maxmsgsize, options_.max_frame_bytes);
    dealer->set(zmq::sockopt::routing_id, ConnectionRoutingId(options_.routing_id, k));
    // Connection k on I/O thread k (mod their number): set before connecting.
    dealer->set(zmq::sockopt::affinity, uint64_t{1} << (k % std::min(options_.zmq_io_threads, 64)));
    if (*server_key != nullptr) {
      dealer->set(zmq::sockopt::curve_serverkey, **server_key);
      dealer->set(zmq::sockopt::curve_publickey, options_.curve->public_key);
      dealer->set(zmq::sockopt::curve_secretkey, options_.curve->secret_key);
    }
    dealer->connect(peer);
  } catch (const zmq::error_t& e) {
    return absl::UnavailableError(absl::StrCat("cannot connect to ", peer, ": ", e.what()));
  }
  zmq::socket_t* socket = dealer.get();
  sockets_.push_back(socket);
  connections[k] = std::move(dealer);
  return socket;
}

int PeerConnections::Close(const std::string& peer) {
  int closed = 0;
  auto dealers = dealers_.find(peer);
  if (dealers != dealers_.end()) {
    for (std::unique_ptr<zmq::socket_t>& dealer : dealers->second) {
      if (dealer == nullptr) continue;
      dealer->set(zmq::sockopt::linger, 0);  // what was not delivered never will be
      sockets_.erase(std::find(sockets_.begin(), sockets_.end(), dealer.get()));
      ++closed;
    }
    dealers_.erase(dealers);  // closes them
  }
  open_.erase(peer);
  return closed;
}

}  // namespace r2sp
