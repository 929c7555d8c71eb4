// SchedulerCore's server replacement (scheduler_core.h). A server declared dead fails the job,
// unless --server_replace_s allows a replacement (asp, ssp and r2sp; bsp's clocks are shared by
// every shard, so it resumes from the checkpoints instead). Then the rank waits, marked lost:
// heartbeats tell the workers to hold and retry their requests to it and nobody is declared
// dead for lack of progress meanwhile. A server that registers with the running job takes the
// lost rank (the lowest, if several), restores that rank's shard from its newest checkpoint
// (only that shard rolls back; see docs/RELIABILITY.md) and serves; the heartbeats carry its
// endpoint and incarnation to the workers. No replacement in time: the job fails as before.
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "scheduler/scheduler_core.h"

namespace r2sp {

absl::Duration SchedulerCore::ServerReplaceTimeout() const {
  return options_.sync == proto::BSP ? absl::ZeroDuration() : options_.server_replace_timeout;
}

void SchedulerCore::ServerLost(Node& server, const std::string& why, absl::Time now) {
  const absl::Duration wait = ServerReplaceTimeout();
  if (wait <= absl::ZeroDuration()) {
    Fail(absl::StrCat("server ", server.rank, " at ", server.endpoint, " was lost (", why,
                      "); the job cannot go on without its shard: resume it from the servers' "
                      "checkpoints (tools/launch --resume=RUN_DIR)",
                      options_.sync == proto::BSP ? "; bsp jobs do not replace servers" : ""));
    return;
  }
  server.replace_by = now + wait;
  // Requests owed by the lost server fail now (a join's prepare is cancelled, not left to time
  // out), and the connection to it closes instead of reconnecting for the rest of the job: a
  // replacement is reached over a new one.
  requester_->ResetPeer(server.endpoint, "the server was lost");
  LOG(WARNING) << "server " << server.rank << " lost; waiting up to "
               << absl::FormatDuration(wait)
               << " for a replacement to restore its shard from its checkpoints";
}

bool SchedulerCore::AwaitingServers(absl::Time now) {
  bool awaiting = false;
  for (Node& s : servers_) {
    if (s.state != NodeState::kDead || s.replace_by == absl::InfinitePast()) continue;
    if (shutting_down_) {
      s.replace_by = absl::InfinitePast();
    } else if (now > s.replace_by) {
      s.replace_by = absl::InfinitePast();
      Fail(absl::StrCat("server ", s.rank, " was lost and no replacement registered within ",
                        absl::FormatDuration(ServerReplaceTimeout()),
                        " (--server_replace_s); resume the job from the servers' checkpoints "
                        "(tools/launch --resume=RUN_DIR)"));
    } else {
      awaiting = true;
    }
  }
  return awaiting;
}

void SchedulerCore::ReplaceServer(const proto::RegisterRequest& reg, Responder& responder,
                                  absl::Time now, bool waited) {
  if (!failure_.empty()) {
    responder.ReplyStatus(absl::FailedPreconditionError("the job failed: " + failure_));
    return;
  }
  Node* lost = nullptr;
  for (Node& s : servers_) {
    if (s.instance_id == reg.instance_id()) {
      responder.ReplyStatus(absl::AlreadyExistsError("this server instance is registered already"));
      return;
    }
    if (lost == nullptr && s.state == NodeState::kDead && s.replace_by != absl::InfinitePast()) {
      lost = &s;
    }
  }
  if (lost == nullptr && ServerReplaceTimeout() > absl::ZeroDuration() && !waited) {
    // A replacement started as soon as its predecessor died registers before the death is
    // detected: it waits (AdmitWaitingServers), as many as the job has servers at most.
    if (static_cast<int>(waiting_servers_.size()) >= options_.num_servers) {
      responder.ReplyStatus(absl::FailedPreconditionError(
          "as many servers as the job has wait to replace lost ones already"));
      return;
    }
    Park(waiting_servers_, reg, responder, now, "a lost server to replace");
    return;
  }
  if (lost == nullptr) {
    responder.ReplyStatus(absl::FailedPreconditionError(
        ServerReplaceTimeout() > absl::ZeroDuration()
            ? "the job has all its servers, and none was lost (a server may join a running job "
              "only to replace a lost one)"
            : "the job has all its servers, and does not replace lost ones (--server_replace_s)"));
    return;
  }
  lost->endpoint = reg.endpoint();
  lost->instance_id = reg.instance_id();
  lost->routing_id = responder.routing_id();
  lost->last_seen = now;
  lost->state = NodeState::kAlive;
  lost->replace_by = absl::InfinitePast();
  ++lost->incarnation;
  requester_->ExpectPeer(reg.endpoint(), proto::SERVER);
  responder.Reply(JoinedReply(*lost));
  LOG(INFO) << "server " << lost->rank << " replaced by the one at " << reg.endpoint()
            << " (incarnation " << lost->incarnation << ")";
}

void SchedulerCore::AdmitWaitingServers(absl::Time now) {
  std::vector<WaitingJoin> still;
  for (WaitingJoin& w : waiting_servers_) {
    bool lost = false;
    for (const Node& s : servers_) {
      lost |= s.state == NodeState::kDead && s.replace_by != absl::InfinitePast();
    }
    if (shutting_down_) {
      w.responder.ReplyStatus(absl::FailedPreconditionError("the job is ending"));
    } else if (!lost && now - w.since < options_.heartbeat_timeout * 3) {
      still.push_back(std::move(w));
    } else {
      ReplaceServer(w.request, w.responder, now, /*waited=*/true);
    }
  }
  waiting_servers_ = std::move(still);
}

void SchedulerCore::AddServerNews(proto::HeartbeatReply& beat) const {
  bool replaced = false;
  for (const Node& s : servers_) {
    if (s.state == NodeState::kDead) {
      (s.replace_by != absl::InfinitePast() ? beat.add_replacing_servers(s.rank)
                                            : beat.add_dead_servers(s.rank));
    }
    replaced |= s.incarnation > 0;
  }
  if (!replaced) return;
  for (const Node& s : servers_) {
    proto::NodeInfo* info = beat.add_servers();
    info->set_role(proto::SERVER);
    info->set_rank(s.rank);
    info->set_endpoint(s.endpoint);
    info->set_incarnation(s.incarnation);
  }
}

}  // namespace r2sp
