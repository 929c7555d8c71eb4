// SchedulerCore's failure detection (scheduler_core.h): heartbeats, which carry a worker's
// progress count and bring back membership news (or tell a node it was declared dead, or that
// the job failed); nodes declared dead for silence, workers for a progress count that stands
// still; and the loss of a server (scheduler_server_replacement.cc: it is replaced, or it fails
// the job).
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "scheduler/scheduler_core.h"

namespace r2sp {

void SchedulerCore::HandleHeartbeat(const Message& request, Node& node, Responder& responder,
                                    absl::Time now) {
  Message reply;
  proto::HeartbeatReply* hb = reply.header.mutable_heartbeat_reply();
  if (node.state == NodeState::kDead) {
    hb->set_declared_dead(true);
    responder.Reply(std::move(reply));
    return;
  }
  node.last_seen = now;
  const int64_t progress = request.header.heartbeat().progress();
  if (progress != node.progress) {
    node.progress = progress;
    node.last_progress = now;
  }
  for (const Node& w : workers_) {
    if (w.state == NodeState::kDead) hb->add_dead_workers(w.rank);
    if (w.state == NodeState::kFinished) hb->add_finished_workers(w.rank);
  }
  AddServerNews(*hb);
  hb->set_shutting_down(shutting_down_);
  if (!failure_.empty()) hb->set_job_failed(failure_);
  responder.Reply(std::move(reply));
}

bool SchedulerCore::WaitingOnScheduler(const Node& node) const {
  if (slots_.IsWaiting(node.rank)) return true;
  for (const auto& [group, barrier] : barriers_) {
    for (const Node* n : barrier.arrived) {
      if (n == &node) return true;
    }
  }
  return false;
}

bool SchedulerCore::DetectFailures(absl::Time now) {
  bool changed = false;
  for (std::deque<Node>* nodes : {&servers_, &workers_}) {
    for (Node& n : *nodes) {
      if (n.state != NodeState::kAlive) continue;
      if (n.role == proto::WORKER && pending_joins_.contains(n.rank)) {
        // A joiner waits for the servers' answers, silent until its REGISTER reply.
        n.last_seen = n.last_progress = now;
        continue;
      }
      std::string why;
      if (now - n.last_seen > options_.heartbeat_timeout) {
        why = absl::StrCat("silent for ", absl::FormatDuration(now - n.last_seen));
      } else if (n.role == proto::WORKER && options_.progress_timeout > absl::ZeroDuration()) {
        if (n.last_progress == absl::Time() || WaitingOnScheduler(n)) n.last_progress = now;
        if (now - n.last_progress > options_.progress_timeout) {
          why = absl::StrCat("no progress for ", absl::FormatDuration(now - n.last_progress),
                             " although its heartbeats came (hung?)");
        }
      }
      if (why.empty()) continue;
      n.state = NodeState::kDead;
      changed = true;
      LOG(WARNING) << RoleName(n.role) << " " << n.rank << " at " << n.endpoint
                   << " declared dead: " << why;
      if (n.role == proto::WORKER) {
        WorkerLeft(n, now);
        if (n.data_shard >= 0) orphan_shards_.push_back(n.data_shard);
      } else if (!shutting_down_) {
        ServerLost(n, why, now);
      }
    }
  }
  if (AwaitingServers(now) || changed) {
    // The others may have been waiting for the dead one, or wait for a lost server's
    // replacement: their progress clocks start again.
    for (Node& w : workers_) {
      if (w.state == NodeState::kAlive) w.last_progress = now;
    }
  }
  return changed;
}

}  // namespace r2sp
