// See server_replacement.h.
#include "scheduler/server_replacement.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/sync_modes.h"
#include "glog/logging.h"

namespace r2sp {

ServerReplacement::ServerReplacement(const ServerReplacementOptions& options, NodeTable* nodes)
    : options_(options), nodes_(nodes) {}

absl::Duration ServerReplacement::timeout() const {
  return RoundSynchronous(options_.sync) ? absl::ZeroDuration() : options_.replace_timeout;
}

absl::Status ServerReplacement::Lost(Node& server, const std::string& why, absl::Time now) {
  const absl::Duration wait = timeout();
  if (wait <= absl::ZeroDuration()) {
    return absl::UnavailableError(
        absl::StrCat("server ", server.rank, " at ", server.endpoint, " was lost (", why,
                     "); the job cannot go on without its shard: resume it from the servers' "
                     "checkpoints (tools/launch --resume=RUN_DIR)",
                     options_.sync == proto::BSP     ? "; bsp jobs do not replace servers"
                     : options_.sync == proto::EASGD ? "; easgd jobs do not replace servers"
                                                     : ""));
  }
  server.replace_by = now + wait;
  LOG(WARNING) << "server " << server.rank << " lost; waiting up to " << absl::FormatDuration(wait)
               << " for a replacement to restore its shard from its checkpoints";
  return absl::OkStatus();
}

absl::StatusOr<bool> ServerReplacement::Awaiting(absl::Time now, bool ending) {
  bool awaiting = false;
  absl::Status overdue;
  for (Node& s : nodes_->servers()) {
    if (s.state != NodeState::kDead || s.replace_by == absl::InfinitePast()) continue;
    if (ending) {
      s.replace_by = absl::InfinitePast();
    } else if (now > s.replace_by) {
      s.replace_by = absl::InfinitePast();
      overdue.Update(absl::DeadlineExceededError(
          absl::StrCat("server ", s.rank, " was lost and no replacement registered within ",
                       absl::FormatDuration(timeout()),
                       " (--server_replace_s); resume the job from the servers' checkpoints "
                       "(tools/launch --resume=RUN_DIR)")));
    } else {
      awaiting = true;
    }
  }
  if (!overdue.ok()) return overdue;
  return awaiting;
}

absl::StatusOr<Node*> ServerReplacement::Replace(const proto::RegisterRequest& reg,
                                                 Responder& responder, absl::Time now,
                                                 const std::string& failure, bool waited) {
  if (!failure.empty()) return absl::FailedPreconditionError("the job failed: " + failure);
  if (nodes_->FindInstance(proto::SERVER, reg.instance_id()) != nullptr) {
    return absl::AlreadyExistsError("this server instance is registered already");
  }
  Node* lost = nullptr;
  for (Node& s : nodes_->servers()) {
    if (s.state == NodeState::kDead && s.replace_by != absl::InfinitePast()) {
      lost = &s;
      break;
    }
  }
  if (lost == nullptr && timeout() > absl::ZeroDuration() && !waited) {
    if (static_cast<int>(waiting_.size()) >= options_.num_servers) {
      return absl::FailedPreconditionError(
          "as many servers as the job has wait to replace lost ones already");
    }
    R2SP_RETURN_IF_ERROR(waiting_.Park(reg, responder, now));
    LOG(INFO) << "server from " << reg.endpoint() << " waits for a lost server to replace";
    return nullptr;
  }
  if (lost == nullptr) {
    return absl::FailedPreconditionError(
        timeout() > absl::ZeroDuration()
            ? "the job has all its servers, and none was lost (a server may join a running job "
              "only to replace a lost one)"
            : "the job has all its servers, and does not replace lost ones (--server_replace_s)");
  }
  lost->endpoint = reg.endpoint();
  lost->instance_id = reg.instance_id();
  lost->routing_id = responder.routing_id();
  lost->last_seen = now;
  nodes_->SetState(*lost, NodeState::kAlive);
  lost->replace_by = absl::InfinitePast();
  ++lost->incarnation;
  LOG(INFO) << "server " << lost->rank << " replaced by the one at " << reg.endpoint()
            << " (incarnation " << lost->incarnation << ")";
  return lost;
}

bool ServerReplacement::AnyLost() const {
  for (const Node& s : nodes_->servers()) {
    if (s.state == NodeState::kDead && s.replace_by != absl::InfinitePast()) return true;
  }
  return false;
}

void ServerReplacement::AdmitWaiting(absl::Time now, bool ending,
                                     absl::FunctionRef<void(WaitingRegister&)> retry) {
  std::vector<WaitingRegister> still;
  for (WaitingRegister& w : waiting_.TakeAll()) {
    if (ending) {
      w.responder.ReplyStatus(absl::FailedPreconditionError("the job is ending"));
    } else if (!AnyLost() && now - w.since < options_.heartbeat_timeout * 3) {
      still.push_back(std::move(w));
    } else {
      retry(w);
    }
  }
  waiting_.PutBack(std::move(still));
}

void ServerReplacement::AddNews(proto::HeartbeatReply& beat) const {
  bool replaced = false;
  for (const Node& s : nodes_->servers()) {
    if (s.state == NodeState::kDead) {
      (s.replace_by != absl::InfinitePast() ? beat.add_replacing_servers(s.rank)
                                            : beat.add_dead_servers(s.rank));
    }
    replaced |= s.incarnation > 0;
  }
  if (!replaced) return;
  for (const Node& s : nodes_->servers()) {
    proto::NodeInfo* info = beat.add_servers();
    info->set_role(proto::SERVER);
    info->set_rank(s.rank);
    info->set_endpoint(s.endpoint);
    info->set_incarnation(s.incarnation);
  }
}

}  // namespace r2sp
