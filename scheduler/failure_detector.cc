// See failure_detector.h.
#include "scheduler/failure_detector.h"

#include <deque>

#include "absl/strings/str_cat.h"
#include "common/peer_checks.h"
#include "glog/logging.h"

namespace r2sp {

FailureDetector::FailureDetector(absl::Duration heartbeat_timeout, absl::Duration progress_timeout)
    : heartbeat_timeout_(heartbeat_timeout), progress_timeout_(progress_timeout) {}

void FailureDetector::Heard(Node& node, int64_t progress, absl::Time now) {
  node.last_seen = now;
  if (progress != node.progress) {
    node.progress = progress;
    node.last_progress = now;
  }
}

std::vector<FailureDetector::Death> FailureDetector::Detect(
    NodeTable& nodes, absl::Time now, absl::FunctionRef<bool(const Node&)> joining,
    absl::FunctionRef<bool(const Node&)> waiting) const {
  std::vector<Death> deaths;
  for (std::deque<Node>* list : {&nodes.servers(), &nodes.workers()}) {
    for (Node& n : *list) {
      if (n.state != NodeState::kAlive) continue;
      if (n.role == proto::WORKER && joining(n)) {
        n.last_seen = n.last_progress = now;
        continue;
      }
      std::string why;
      if (now - n.last_seen > heartbeat_timeout_) {
        why = absl::StrCat("silent for ", absl::FormatDuration(now - n.last_seen));
      } else if (n.role == proto::WORKER && progress_timeout_ > absl::ZeroDuration()) {
        if (n.last_progress == absl::Time() || waiting(n)) n.last_progress = now;
        if (now - n.last_progress > progress_timeout_) {
          why = absl::StrCat("no progress for ", absl::FormatDuration(now - n.last_progress),
                             " although its heartbeats came (hung?)");
        }
      }
      if (why.empty()) continue;
      nodes.SetState(n, NodeState::kDead);
      LOG(WARNING) << RoleName(n.role) << " " << n.rank << " at " << n.endpoint
                   << " declared dead: " << why;
      deaths.push_back(Death{&n, std::move(why)});
    }
  }
  return deaths;
}

void FailureDetector::Forgive(NodeTable& nodes, absl::Duration stalled) {
  for (std::deque<Node>* list : {&nodes.servers(), &nodes.workers()}) {
    for (Node& n : *list) {
      if (n.state != NodeState::kAlive) continue;
      n.last_seen += stalled;
      if (n.last_progress != absl::Time()) n.last_progress += stalled;
    }
  }
}

void FailureDetector::RestartProgressClocks(NodeTable& nodes, absl::Time now) {
  for (Node& w : nodes.workers()) {
    if (w.state == NodeState::kAlive) w.last_progress = now;
  }
}

}  // namespace r2sp
