// The scheduler's table of the job's nodes: every server and worker by rank, with its endpoint,
// registered connection, state, counters and liveness, data shard and incarnation. It answers
// who sent a request (Sender, through CheckPeerConnection), what the address book and the
// membership list the nodes, and what heartbeats report of the workers.
#ifndef R2SP_SCHEDULER_NODE_TABLE_H_
#define R2SP_SCHEDULER_NODE_TABLE_H_

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/handler.h"
#include "proto/messages.pb.h"
#include "scheduler/worker_news.h"

namespace r2sp {

enum class NodeState { kAlive, kFinished, kDead };

// A node's role and rank: who it is in the job.
struct NodeId {
  proto::Role role;
  int rank;
  bool operator==(const NodeId& other) const { return role == other.role && rank == other.rank; }
};

struct Node {
  proto::Role role;
  int rank;
  std::string endpoint;
  std::string instance_id;
  std::string routing_id;  // the connection it registered over; its requests must use it
  absl::Time last_seen;
  NodeState state = NodeState::kAlive;  // changed through NodeTable::SetState only
  bool left = false;  // dead because it said so (LEAVE), not declared dead
  proto::NodeCounters counters;
  int data_shard = -1;       // workers: the data shard they train on (proto RegisterReply)
  int64_t progress = -1;     // workers: the count their latest heartbeat carried
  absl::Time last_progress;  // when that count last changed
  // Servers: which replacement this is (proto NodeInfo.incarnation), and, lost, until when a
  // replacement is awaited (InfinitePast: none is).
  int incarnation = 0;
  absl::Time replace_by = absl::InfinitePast();

  NodeId id() const { return NodeId{role, rank}; }
};

// Not thread-safe: SchedulerCore calls it under its lock. Nodes never move (deques), so a
// Node& stays valid while the table lives, except the last worker's after RemoveLastWorker.
class NodeTable {
 public:
  // Adds a node with the next rank of its role; its data shard is its rank.
  Node& Add(proto::Role role, const std::string& endpoint, const std::string& instance_id,
            const std::string& routing_id, absl::Time now);
  // Takes back the last worker added (a join that was cancelled).
  void RemoveLastWorker();

  std::deque<Node>& servers() { return servers_; }
  const std::deque<Node>& servers() const { return servers_; }
  std::deque<Node>& workers() { return workers_; }
  const std::deque<Node>& workers() const { return workers_; }

  // The registered node the header names (dead or not), if the request came over that node's
  // connection and, with authentication, from a peer of its role: else PERMISSION_DENIED, or
  // INVALID_ARGUMENT for a role and rank that no node has.
  absl::StatusOr<Node*> Sender(const proto::Header& header, const Responder& responder);
  // The node of `role` that registered as `instance_id`, or null.
  const Node* FindInstance(proto::Role role, const std::string& instance_id) const;

  // The address book's nodes; `for_servers` adds the workers' routing ids (servers take PUSH
  // and PULL only from those connections).
  void AddNodesTo(proto::AddressBook& book, bool for_servers) const;
  // The MEMBERSHIP naming every worker there is.
  proto::Membership Grown() const;
  // Sets `node`'s state; a worker's death or finish becomes news for the heartbeats.
  // REQUIRES: a worker leaves kAlive once and never comes back (a server may: a replacement).
  void SetState(Node& node, NodeState state);
  // The heartbeat's news of the workers, the dead and the finished, that a node which took in
  // the news up to version `seen` has not heard (WorkerNews::AddTo): O(that news).
  void AddWorkerNews(int64_t seen, proto::HeartbeatReply& beat) const { news_.AddTo(seen, beat); }

  bool AnyWorkerAlive() const;
  bool AnyWorkerFinished() const;
  // The live nodes, servers first.
  std::vector<NodeId> Live() const;
  // The data shards of the workers not dead (joining ones included), by rank.
  std::vector<int> LiveShards() const;

 private:
  std::deque<Node> servers_;
  std::deque<Node> workers_;
  WorkerNews news_;
};

}  // namespace r2sp

#endif  // R2SP_SCHEDULER_NODE_TABLE_H_
