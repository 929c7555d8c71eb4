// The scheduler's barriers, one per group (proto Group): a group's barrier completes once every
// live member has arrived; members that die or finish meanwhile stop being waited for. Barrier
// ids count up from 0 per group.
#ifndef R2SP_SCHEDULER_BARRIER_BOOK_H_
#define R2SP_SCHEDULER_BARRIER_BOOK_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "common/handler.h"
#include "scheduler/node_table.h"

namespace r2sp {

// Not thread-safe: SchedulerCore calls it under its lock.
class BarrierBook {
 public:
  // Whether a node of `role` is a member of `group`.
  static bool InGroup(proto::Role role, proto::Group group);

  // BARRIER from `node`. OK: `responder` waits for the barrier to complete (Release). An error
  // (INVALID_ARGUMENT: not a member, or not the group's current barrier; ALREADY_EXISTS:
  // waiting at it already): `responder` has not been answered.
  absl::Status Arrive(const proto::Header& request, NodeId node, Responder& responder);
  // Completes, and answers OK, each barrier that every node in `live` of its group has reached;
  // returns how many waiters it answered.
  int Release(const std::vector<NodeId>& live);

  // Whether `node` waits at a barrier (it cannot make progress meanwhile).
  bool IsWaiting(NodeId node) const;
  // The id of `group`'s current barrier: 0 until the group has met one.
  uint64_t current(proto::Group group) const;

 private:
  // A node as a set key (role, rank).
  static uint64_t Key(NodeId node) {
    return (static_cast<uint64_t>(node.role) << 32) | static_cast<uint32_t>(node.rank);
  }
  // Arrivals in a hash set: with a thousand workers, Release after each arrival and the failure
  // detector's IsWaiting for every worker each tick were quadratic (cubic per barrier) in
  // linear scans of a vector (docs/BENCHMARKS.md#many-workers-on-one-scheduler).
  struct Barrier {
    uint64_t id = 0;
    absl::flat_hash_set<uint64_t> arrived;
    std::vector<Responder> waiting;
  };
  absl::flat_hash_map<int, Barrier> barriers_;  // by proto::Group
};

}  // namespace r2sp

#endif  // R2SP_SCHEDULER_BARRIER_BOOK_H_
