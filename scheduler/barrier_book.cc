// See barrier_book.h.
#include "scheduler/barrier_book.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace r2sp {

bool BarrierBook::InGroup(proto::Role role, proto::Group group) {
  switch (group) {
    case proto::ALL:
      return true;
    case proto::WORKERS:
      return role == proto::WORKER;
    case proto::SERVERS:
      return role == proto::SERVER;
    default:
      return false;
  }
}

absl::Status BarrierBook::Arrive(const proto::Header& request, NodeId node, Responder& responder) {
  const proto::BarrierRequest& req = request.barrier();
  if (!request.has_barrier() || !InGroup(node.role, req.group())) {
    return absl::InvalidArgumentError("BARRIER for a group the sender is not in");
  }
  Barrier& barrier = barriers_[req.group()];
  if (req.barrier_id() != barrier.id) {
    return absl::InvalidArgumentError(absl::StrCat("barrier ", req.barrier_id(), " of group ",
                                                   proto::Group_Name(req.group()),
                                                   " but the group is at barrier ", barrier.id));
  }
  if (!barrier.arrived.insert(Key(node)).second) {
    return absl::AlreadyExistsError("already waiting at this barrier");
  }
  barrier.waiting.push_back(std::move(responder));
  return absl::OkStatus();
}

int BarrierBook::Release(const std::vector<NodeId>& live) {
  int answered = 0;
  for (auto& [group, barrier] : barriers_) {
    if (barrier.waiting.empty()) continue;
    bool complete = true;
    for (const NodeId& n : live) {
      if (!InGroup(n.role, static_cast<proto::Group>(group))) continue;
      if (!barrier.arrived.contains(Key(n))) {
        complete = false;
        break;
      }
    }
    if (!complete) continue;
    for (Responder& r : barrier.waiting) r.ReplyStatus(absl::OkStatus());
    answered += static_cast<int>(barrier.waiting.size());
    barrier.waiting.clear();
    barrier.arrived.clear();
    ++barrier.id;
  }
  return answered;
}

bool BarrierBook::IsWaiting(NodeId node) const {
  for (const auto& [group, barrier] : barriers_) {
    if (barrier.arrived.contains(Key(node))) return true;
  }
  return false;
}

uint64_t BarrierBook::current(proto::Group group) const {
  auto it = barriers_.find(group);
  return it == barriers_.end() ? 0 : it->second.id;
}

}  // namespace r2sp
