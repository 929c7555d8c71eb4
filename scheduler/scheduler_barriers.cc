// SchedulerCore's barriers (scheduler_core.h): a group's barrier completes once every live
// member has arrived; members that die or finish meanwhile stop being waited for.
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "scheduler/scheduler_core.h"

namespace r2sp {

bool SchedulerCore::InGroup(const Node& node, proto::Group group) const {
  switch (group) {
    case proto::ALL:
      return true;
    case proto::WORKERS:
      return node.role == proto::WORKER;
    case proto::SERVERS:
      return node.role == proto::SERVER;
    default:
      return false;
  }
}

void SchedulerCore::HandleBarrier(const Message& request, Node& node, Responder& responder) {
  const proto::BarrierRequest& req = request.header.barrier();
  if (!request.header.has_barrier() || !InGroup(node, req.group())) {
    responder.ReplyStatus(absl::InvalidArgumentError("BARRIER for a group the sender is not in"));
    return;
  }
  BarrierState& barrier = barriers_[req.group()];
  if (req.barrier_id() != barrier.id) {
    responder.ReplyStatus(absl::InvalidArgumentError(absl::StrCat(
        "barrier ", req.barrier_id(), " of group ", proto::Group_Name(req.group()),
        " but the group is at barrier ", barrier.id)));
    return;
  }
  for (Node* n : barrier.arrived) {
    if (n == &node) {
      responder.ReplyStatus(absl::AlreadyExistsError("already waiting at this barrier"));
      return;
    }
  }
  barrier.arrived.push_back(&node);
  barrier.waiting.push_back(std::move(responder));
  ReleaseBarriers();
}

void SchedulerCore::ReleaseBarriers() {
  for (auto& [group, barrier] : barriers_) {
    if (barrier.waiting.empty()) continue;
    bool complete = true;
    for (std::deque<Node>* nodes : {&servers_, &workers_}) {
      for (Node& n : *nodes) {
        if (n.state != NodeState::kAlive || !InGroup(n, static_cast<proto::Group>(group))) {
          continue;
        }
        bool arrived = false;
        for (Node* a : barrier.arrived) arrived |= a == &n;
        complete &= arrived;
      }
    }
    if (!complete) continue;
    for (Responder& r : barrier.waiting) r.ReplyStatus(absl::OkStatus());
    barrier.waiting.clear();
    barrier.arrived.clear();
    ++barrier.id;
  }
}

}  // namespace r2sp
