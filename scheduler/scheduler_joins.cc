// SchedulerCore's workers that join a running job (scheduler_core.h), in every mode. A joiner
// that wants a data shard waits for a dead worker's (at most once per epoch: it never trains a
// live one's), then gets the next rank once every live server knows it. asp and r2sp joiners
// take part at once: one MEMBERSHIP per server. bsp and ssp joiners join at a clock boundary,
// one join at a time, in two steps (proto Membership): `prepare` to every live server (a bsp
// server then holds its clocks) answered with the first clock a joiner may take part from
// there; the largest answer is the join clock, which the MEMBERSHIP that adds the worker
// carries to every server and the REGISTER reply to the joiner. A server that cannot prepare
// cancels the join (the hold is released, the joiner is told to try again).
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "scheduler/scheduler_core.h"

namespace r2sp {
namespace {

// A server's answer to a prepare beyond this is malformed.
constexpr int64_t kMaxJoinClock = int64_t{1} << 48;

}  // namespace

bool SchedulerCore::JoinsAtAClock() const {
  return options_.sync == proto::BSP || options_.sync == proto::SSP;
}

void SchedulerCore::AdmitWaitingJoins(absl::Time now) {
  std::vector<WaitingJoin> waiting, still;
  waiting.swap(waiting_joins_);  // JoinWorker may park again
  for (WaitingJoin& w : waiting) {
    if (shutting_down_) {
      w.responder.ReplyStatus(absl::FailedPreconditionError("the job is ending"));
    } else if ((JoinsAtAClock() && !pending_joins_.empty()) ||
               (w.request.wants_data_shard() && orphan_shards_.empty() &&
                now - w.since < options_.heartbeat_timeout * 3)) {
      still.push_back(std::move(w));
    } else {
      JoinWorker(w.request, w.responder, now, /*waited=*/true);
    }
  }
  for (WaitingJoin& w : waiting_joins_) still.push_back(std::move(w));
  waiting_joins_ = std::move(still);
}

void SchedulerCore::Park(std::vector<WaitingJoin>& waiting, const proto::RegisterRequest& reg,
                         Responder& responder, absl::Time now, const char* for_what) {
  for (WaitingJoin& w : waiting) {
    if (w.request.instance_id() == reg.instance_id()) {  // a retry: answer the newest
      if (w.responder.routing_id() != responder.routing_id()) {
        Deny(responder, "REGISTER repeated an instance id over another connection");
        return;
      }
      w.responder = std::move(responder);
      return;
    }
  }
  LOG(INFO) << RoleName(reg.role()) << " from " << reg.endpoint() << " waits for " << for_what;
  waiting.push_back(WaitingJoin{reg, std::move(responder), now});
}

void SchedulerCore::JoinWorker(const proto::RegisterRequest& reg, Responder& responder,
                               absl::Time now, bool waited) {
  for (const Node& w : workers_) {
    if (w.instance_id == reg.instance_id()) {
      responder.ReplyStatus(absl::AlreadyExistsError("this worker instance is registered already"));
      return;
    }
  }
  const bool wait_for_shard = !waited && reg.wants_data_shard() && orphan_shards_.empty();
  if (wait_for_shard || (JoinsAtAClock() && !pending_joins_.empty())) {
    if (static_cast<int>(waiting_joins_.size()) >= options_.num_workers) {
      responder.ReplyStatus(absl::FailedPreconditionError(
          "as many workers as the job has wait to join already"));
      return;
    }
    Park(waiting_joins_, reg, responder, now,
         wait_for_shard ? "a free data shard to join" : "the join before it");
    return;
  }
  const int rank = static_cast<int>(workers_.size());
  workers_.push_back(
      Node{proto::WORKER, rank, reg.endpoint(), reg.instance_id(), responder.routing_id(), now});
  if (!orphan_shards_.empty()) {
    workers_.back().data_shard = orphan_shards_.front();
    orphan_shards_.pop_front();
  }
  proto::Membership membership;
  if (JoinsAtAClock()) {
    membership.set_prepare(true);
  } else {
    membership = Grown();
  }
  const int servers = TellServers(rank, membership);
  LOG(INFO) << "worker joining from " << reg.endpoint() << " as worker " << rank
            << "; telling " << servers << " servers"
            << (JoinsAtAClock() ? " (it joins at a clock boundary)" : "");
  pending_joins_.emplace(rank, PendingJoin{std::move(responder), servers, JoinsAtAClock()});
  if (servers == 0) ServersAnswered(rank);
}

proto::Membership SchedulerCore::Grown() const {
  proto::Membership membership;
  membership.set_num_workers(static_cast<int>(workers_.size()));
  for (const Node& w : workers_) membership.add_worker_ids(w.routing_id);
  return membership;
}

int SchedulerCore::TellServers(int rank, const proto::Membership& membership) {
  int servers = 0;
  for (const Node& s : servers_) {
    if (s.state != NodeState::kAlive) continue;
    memberships_to_send_.push_back({rank, s.endpoint, membership});
    ++servers;
  }
  return servers;
}

void SchedulerCore::ServerKnowsJoin(int rank, absl::StatusOr<Message> reply) {
  {
    absl::MutexLock lock(&mu_);
    const bool ok = reply.ok() && reply->header.code() == proto::OK;
    if (!ok) {
      LOG(WARNING) << "a server did not take worker " << rank << ": "
                   << (reply.ok() ? reply->header.error() : reply.status().ToString());
    }
    auto it = pending_joins_.find(rank);
    if (it == pending_joins_.end()) return;  // a cancel's answer
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
  SendQueuedRequests();  // the commit or the cancel
}

void SchedulerCore::ServersAnswered(int rank) {
  auto it = pending_joins_.find(rank);
  if (it == pending_joins_.end()) return;
  PendingJoin& join = it->second;
  if (!join.preparing) {
    FinishJoin(rank);
    return;
  }
  join.preparing = false;
  if (join.refused) {
    CancelJoin(rank);
    return;
  }
  proto::Membership membership = Grown();
  membership.set_join_clock(join.join_clock);
  join.acks_outstanding = TellServers(rank, membership);
  LOG(INFO) << "worker " << rank << " joins at clock " << join.join_clock;
  if (join.acks_outstanding == 0) FinishJoin(rank);
}

void SchedulerCore::CancelJoin(int rank) {
  proto::Membership cancel;
  cancel.set_cancel(true);
  TellServers(rank, cancel);
  auto it = pending_joins_.find(rank);
  it->second.responder.ReplyStatus(absl::UnavailableError(
      "the servers could not agree on a clock for this worker to join at; register again"));
  pending_joins_.erase(it);
  // Joins at a clock come one at a time, so the joiner is the last worker: it never was one.
  CHECK_EQ(rank, static_cast<int>(workers_.size()) - 1);
  if (workers_.back().data_shard >= 0) orphan_shards_.push_front(workers_.back().data_shard);
  workers_.pop_back();
  LOG(WARNING) << "the join of a worker as rank " << rank << " was cancelled";
}

Message SchedulerCore::JoinedReply(const Node& node) const {
  Message reply;
  proto::RegisterReply* r = reply.header.mutable_register_reply();
  r->set_rank(node.rank);
  *r->mutable_book() = Book(/*for_servers=*/node.role == proto::SERVER);
  r->set_scheduler_id(requester_->RoutingId());
  r->set_joined_running_job(true);
  r->set_data_shard(node.data_shard);
  r->set_data_world(options_.num_workers);
  auto next = [this](proto::Group group) -> uint64_t {  // 0: the group has met no barrier
    auto it = barriers_.find(group);
    return it == barriers_.end() ? 0 : it->second.id;
  };
  r->set_next_workers_barrier(next(proto::WORKERS));
  r->set_next_all_barrier(next(proto::ALL));
  return reply;
}

void SchedulerCore::FinishJoin(int rank) {
  auto it = pending_joins_.find(rank);
  if (it == pending_joins_.end()) return;
  Node& node = workers_[rank];
  node.last_seen = clock_();  // the servers' round trip counted against its heartbeats
  slots_.WorkerJoined(rank);
  Message reply = JoinedReply(node);
  reply.header.mutable_register_reply()->set_join_clock(it->second.join_clock);
  it->second.responder.Reply(std::move(reply));
  pending_joins_.erase(it);
  LOG(INFO) << "worker " << rank << " joined the running job (" << slots_.planner().ring().size()
            << " in the slot ring; data shard " << node.data_shard << ")";
}

}  // namespace r2sp
