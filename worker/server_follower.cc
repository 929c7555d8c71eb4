// See server_follower.h.
#include "worker/server_follower.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace r2sp {

ServerFollower::ServerFollower(Requester* requester, PsClient* ps,
                               const proto::AddressBook& book)
    : requester_(requester), ps_(ps), reset_(book.servers_size(), false) {
  for (const proto::NodeInfo& s : book.servers()) incarnation_.push_back(s.incarnation());
}

void ServerFollower::OnHeartbeat(const proto::HeartbeatReply& beat) {
  absl::MutexLock lock(&mu_);
  const int n = static_cast<int>(incarnation_.size());
  for (int rank : beat.replacing_servers()) {
    if (rank < 0 || rank >= n || reset_[rank]) continue;
    reset_[rank] = true;
    LOG(WARNING) << "server " << rank << " was lost; holding its requests until a replacement "
                 << "restores its shard";
    requester_->ResetPeer(ps_->ServerEndpoint(rank), "the scheduler declared it lost");
  }
  for (const proto::NodeInfo& s : beat.servers()) {
    const int rank = s.rank();
    if (rank < 0 || rank >= n || s.incarnation() <= incarnation_[rank] || s.endpoint().empty()) {
      continue;
    }
    const std::string old = ps_->ServerEndpoint(rank);
    incarnation_[rank] = s.incarnation();
    ps_->SetServerEndpoint(rank, s.endpoint());  // first: what the reset fails goes there
    // Requests still owed at the old endpoint are sent again: those the old server owed (its
    // loss went unnoticed here), or retries sent there while the rank was lost, which only a
    // replacement at the same endpoint would have answered.
    // Not when another rank's replacement now serves there (two lost together, restarted on
    // each other's ports): its requests would fail for nothing; what was queued there for this
    // rank reaches that server, which refuses it as meant for another (Header.to_server), and
    // it comes here.
    if ((!reset_[rank] || old != s.endpoint()) && !ServedByAnotherRank(old, rank)) {
      requester_->ResetPeer(old, "the scheduler replaced it");
    }
    reset_[rank] = false;
    LOG(INFO) << "server " << rank << " replaced (incarnation " << s.incarnation() << ") at "
              << s.endpoint();
  }
}

bool ServerFollower::ServedByAnotherRank(const std::string& endpoint, int rank) const {
  for (int other = 0; other < static_cast<int>(incarnation_.size()); ++other) {
    if (other != rank && ps_->ServerEndpoint(other) == endpoint) return true;
  }
  return false;
}

}  // namespace r2sp
