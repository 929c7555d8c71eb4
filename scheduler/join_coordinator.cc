// See join_coordinator.h.
#include "scheduler/join_coordinator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/sync_modes.h"
#include "glog/logging.h"

namespace r2sp {
namespace {

// A server's answer to a prepare beyond this is malformed.
constexpr int64_t kMaxJoinClock = int64_t{1} << 48;

}  // namespace

JoinCoordinator::JoinCoordinator(const JoinCoordinatorOptions& options, NodeTable* nodes)
    : options_(options), nodes_(nodes) {}

bool JoinCoordinator::JoinsAtAClock() const {
  return RoundSynchronous(options_.sync) || options_.sync == proto::SSP;
}

absl::Status JoinCoordinator::Join(const proto::RegisterRequest& reg, Responder& responder,
                                   absl::Time now, bool waited) {
  if (nodes_->FindInstance(proto::WORKER, reg.instance_id()) != nullptr) {
    return absl::AlreadyExistsError("this worker instance is registered already");
  }
  const bool wait_for_shard = !waited && reg.wants_data_shard() && orphan_shards_.empty();
  if (wait_for_shard || (JoinsAtAClock() && !pending_.empty())) {
    if (static_cast<int>(waiting_.size()) >= options_.num_workers) {
      return absl::FailedPreconditionError("as many workers as the job has wait to join already");
    }
    R2SP_RETURN_IF_ERROR(waiting_.Park(reg, responder, now));
    LOG(INFO) << "worker from " << reg.endpoint() << " waits for "
              << (wait_for_shard ? "a free data shard to join" : "the join before it");
    return absl::OkStatus();
  }
  Node& node =
      nodes_->Add(proto::WORKER, reg.endpoint(), reg.instance_id(), responder.routing_id(), now);
  node.data_shard = -1;
  if (!orphan_shards_.empty()) {
    node.data_shard = orphan_shards_.front();
    orphan_shards_.pop_front();
  }
  proto::Membership membership;
  if (JoinsAtAClock()) {
    membership.set_prepare(true);
  } else {
    membership = nodes_->Grown();
  }
  const int rank = node.rank;
  const int servers = TellServers(rank, membership);
  LOG(INFO) << "worker joining from " << reg.endpoint() << " as worker " << rank
            << (reg.has_requested_rank() && reg.requested_rank() != rank
                    ? absl::StrCat(" (it asked for rank ", reg.requested_rank(),
                                   "; a worker joining a running job takes the next rank)")
                    : "")
            << "; telling " << servers << " servers"
            << (JoinsAtAClock() ? " (it joins at a clock boundary)" : "");
  pending_.emplace(rank, PendingJoin{std::move(responder), servers, JoinsAtAClock()});
  if (servers == 0) ServersAnswered(rank);
  return absl::OkStatus();
}

void JoinCoordinator::AdmitWaiting(absl::Time now, bool ending) {
  std::vector<WaitingRegister> still;
  for (WaitingRegister& w : waiting_.TakeAll()) {  // Join may park again
    if (ending) {
      w.responder.ReplyStatus(absl::FailedPreconditionError("the job is ending"));
    } else if ((JoinsAtAClock() && !pending_.empty()) ||
               (w.request.wants_data_shard() && orphan_shards_.empty() &&
                now - w.since < options_.heartbeat_timeout * 3)) {
      still.push_back(std::move(w));
    } else if (absl::Status status = Join(w.request, w.responder, now, /*waited=*/true);
               !status.ok()) {
      w.responder.ReplyStatus(status);
    }
  }
  waiting_.PutBack(std::move(still));
}

int JoinCoordinator::TellServers(int rank, const proto::Membership& membership) {
  int servers = 0;
  for (const Node& s : nodes_->servers()) {
    if (s.state != NodeState::kAlive) continue;
    memberships_.push_back({rank, s.endpoint, membership});
    ++servers;
  }
  return servers;
}

void JoinCoordinator::ServerAnswered(int rank, const absl::StatusOr<Message>& reply) {
  const bool ok = reply.ok() && reply->header.code() == proto::OK;
  if (!ok) {
    LOG(WARNING) << "a server did not take worker " << rank << ": "
                 << (reply.ok() ? reply->header.error() : reply.status().ToString());
  }
  auto it = pending_.find(rank);
  if (it == pending_.end()) return;  // a cancel's answer
  PendingJoin& join = it->second;
  if (join.preparing) {
    const int64_t first = ok ? reply->header.clock() : -1;
    if (first < 0 || first > kMaxJoinClock) {
      join.refused = true;
    } else {
      join.join_clock = std::max(join.join_clock, first);
    }
  }
  if (--join.acks_outstanding > 0) return;
  ServersAnswered(rank);
}

void JoinCoordinator::ServersAnswered(int rank) {
  auto it = pending_.find(rank);
  if (it == pending_.end()) return;
  PendingJoin& join = it->second;
  if (!join.preparing) {
    Complete(rank);
    return;
  }
  join.preparing = false;
  if (join.refused) {
    CancelJoin(rank);
    return;
  }
  proto::Membership membership = nodes_->Grown();
  membership.set_join_clock(join.join_clock);
  join.acks_outstanding = TellServers(rank, membership);
  LOG(INFO) << "worker " << rank << " joins at clock " << join.join_clock;
  if (join.acks_outstanding == 0) Complete(rank);
}

void JoinCoordinator::CancelJoin(int rank) {
  proto::Membership cancel;
  cancel.set_cancel(true);
  TellServers(rank, cancel);
  auto it = pending_.find(rank);
  it->second.responder.ReplyStatus(absl::UnavailableError(
      "the servers could not agree on a clock for this worker to join at; register again"));
  pending_.erase(it);
  // Joins at a clock come one at a time, so the joiner is the last worker: it never was one.
  CHECK_EQ(rank, static_cast<int>(nodes_->workers().size()) - 1);
  const int shard = nodes_->workers().back().data_shard;
  if (shard >= 0) orphan_shards_.push_front(shard);
  nodes_->RemoveLastWorker();
  LOG(WARNING) << "the join of a worker as rank " << rank << " was cancelled";
}

void JoinCoordinator::Complete(int rank) {
  auto it = pending_.find(rank);
  completed_.push_back(CompletedJoin{rank, it->second.join_clock, std::move(it->second.responder)});
  pending_.erase(it);
}

std::vector<MembershipNote> JoinCoordinator::TakeMemberships() {
  std::vector<MembershipNote> notes;
  notes.swap(memberships_);
  return notes;
}

std::vector<CompletedJoin> JoinCoordinator::TakeCompleted() {
  std::vector<CompletedJoin> done;
  done.swap(completed_);
  return done;
}

}  // namespace r2sp
