// See node_table.h.
#include "scheduler/node_table.h"

#include "absl/strings/str_cat.h"
#include "common/peer_checks.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace r2sp {

Node& NodeTable::Add(proto::Role role, const std::string& endpoint, const std::string& instance_id,
                     const std::string& routing_id, absl::Time now) {
  CHECK(role == proto::SERVER || role == proto::WORKER) << proto::Role_Name(role);
  std::deque<Node>& nodes = role == proto::SERVER ? servers_ : workers_;
  const int rank = static_cast<int>(nodes.size());
  nodes.push_back(Node{role, rank, endpoint, instance_id, routing_id, now});
  nodes.back().data_shard = rank;  // a server's too: a replaced server's reply carries it
  return nodes.back();
}

void NodeTable::RemoveLastWorker() {
  CHECK(!workers_.empty());
  workers_.pop_back();
}

absl::StatusOr<Node*> NodeTable::Sender(const proto::Header& header, const Responder& responder) {
  const proto::Role role = header.sender_role();
  const int rank = header.sender_rank();
  std::deque<Node>* nodes = role == proto::SERVER   ? &servers_
                            : role == proto::WORKER ? &workers_
                                                    : nullptr;
  Node* node = nodes != nullptr && rank >= 0 && rank < static_cast<int>(nodes->size())
                   ? &(*nodes)[rank]
                   : nullptr;
  const std::string wrong_key = absl::StrCat("the sender's key is not a ", RoleName(role), "'s");
  const std::string unknown_rank = absl::StrCat("unknown sender ", proto::Role_Name(role), " ");
  const PeerCheckWording wording{wrong_key, unknown_rank};
  R2SP_RETURN_IF_ERROR(CheckPeerConnection(responder, role, rank,
                                           node == nullptr ? nullptr : &node->routing_id, wording));
  return node;
}

const Node* NodeTable::FindInstance(proto::Role role, const std::string& instance_id) const {
  for (const Node& n : role == proto::SERVER ? servers_ : workers_) {
    if (n.instance_id == instance_id) return &n;
  }
  return nullptr;
}

void NodeTable::AddNodesTo(proto::AddressBook& book, bool for_servers) const {
  for (const std::deque<Node>* nodes : {&servers_, &workers_}) {
    for (const Node& n : *nodes) {
      proto::NodeInfo* info = n.role == proto::SERVER ? book.add_servers() : book.add_workers();
      info->set_role(n.role);
      info->set_rank(n.rank);
      info->set_endpoint(n.endpoint);
      info->set_incarnation(n.incarnation);
      if (for_servers && n.role == proto::WORKER) info->set_routing_id(n.routing_id);
    }
  }
}

proto::Membership NodeTable::Grown() const {
  proto::Membership membership;
  membership.set_num_workers(static_cast<int>(workers_.size()));
  for (const Node& w : workers_) membership.add_worker_ids(w.routing_id);
  return membership;
}

void NodeTable::SetState(Node& node, NodeState state) {
  if (node.role == proto::WORKER && state != node.state) {
    CHECK(node.state == NodeState::kAlive && state != NodeState::kAlive)
        << "worker " << node.rank << " cannot change state again";
    if (state == NodeState::kDead) news_.Died(node.rank);
    if (state == NodeState::kFinished) news_.Finished(node.rank);
  }
  node.state = state;
}

bool NodeTable::AnyWorkerAlive() const {
  for (const Node& w : workers_) {
    if (w.state == NodeState::kAlive) return true;
  }
  return false;
}

bool NodeTable::AnyWorkerFinished() const {
  for (const Node& w : workers_) {
    if (w.state == NodeState::kFinished) return true;
  }
  return false;
}

std::vector<NodeId> NodeTable::Live() const {
  std::vector<NodeId> live;
  for (const std::deque<Node>* nodes : {&servers_, &workers_}) {
    for (const Node& n : *nodes) {
      if (n.state == NodeState::kAlive) live.push_back(n.id());
    }
  }
  return live;
}

std::vector<int> NodeTable::LiveShards() const {
  std::vector<int> live;
  for (const Node& w : workers_) {
    if (w.state != NodeState::kDead && w.data_shard >= 0) live.push_back(w.data_shard);
  }
  return live;
}

}  // namespace r2sp
