// Which workers a server's BSP clocks and SSP bounds wait for: the live ones (a worker that died
// or finished, from the scheduler's heartbeat replies, no longer counts), each from the clock it
// joined at, and workers that join a running job (MEMBERSHIP). asp and r2sp joiners take part at
// once. bsp and ssp joiners join at a clock boundary, in two steps the scheduler drives (proto
// Membership): prepare, where a bsp server holds its clocks and every server answers the first
// clock a joiner may take part from, then the MEMBERSHIP with the agreed join_clock. bsp: clocks
// before it complete without the joiner, clocks from it on wait for it, and none from it on
// completed before (the hold). ssp: the joiner counts as having pushed every clock before it,
// so the staleness bound does not wait for it.
#ifndef R2SP_SERVER_WORKER_ROSTER_H_
#define R2SP_SERVER_WORKER_ROSTER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/messages.pb.h"
#include "server/partition_table.h"

namespace r2sp {

// Thread-safety: none; the owner (ServerHandler) serialises every call under its mutex.
class WorkerRoster {
 public:
  // Join clocks beyond this are refused (a malformed or hostile MEMBERSHIP).
  static constexpr int64_t kMaxJoinClock = int64_t{1} << 48;
  // A MEMBERSHIP adds at most this many workers at once.
  static constexpr int kMaxNewWorkers = 1024;

  explicit WorkerRoster(proto::SyncMode sync) : sync_(sync) {}

  // The job's first `num_workers` workers, all live, taking part from clock 0; `rank` is this
  // server's (for its logs).
  void Reset(int rank, int num_workers);
  int num_workers() const { return static_cast<int>(live_.size()); }
  // Per worker: whether it is live, and the clock it takes part in BSP aggregation from.
  const std::vector<bool>& live() const { return live_; }
  const std::vector<int64_t>& joined_at() const { return joined_at_; }

  // Marks these ranks departed (unknown ranks are ignored); whether any was live before.
  bool Depart(const std::vector<int>& departed);
  // Whether a bsp join holds `clock` back from completing (it is past the prepared join's).
  bool Holds(int64_t clock) const { return hold_after_.has_value() && clock > *hold_after_; }

  // The prepare step: the first clock a joiner may take part from. bsp: holds clocks past the
  // one being aggregated (the first prepare sets the hold, later ones keep it); ssp: the clock
  // the most advanced live worker pushes next. FailedPrecondition in asp and r2sp.
  absl::StatusOr<int64_t> Prepare(const PartitionTable& partitions);
  // Ends a hold; whether there was one (clocks may now complete, parked pulls be answered).
  bool EndHold();

  // Whether `membership` may grow a job of num_workers() workers: its size and ids, and its join
  // clock in range. InvalidArgument if not; nothing changes.
  absl::Status CheckGrow(const proto::Membership& membership) const;
  // bsp: whether no partition completed a clock from `join_clock` on without the joiner
  // (FailedPrecondition naming the partition); OK in the other modes.
  absl::Status CheckJoinClock(int64_t join_clock, const PartitionTable& partitions) const;
  // Ranks up to num_workers - 1 exist now, live, taking part from `join_clock`; the partitions'
  // pushes and aggregators grow with them (an ssp joiner counts as having pushed the clocks
  // before its first). REQUIRES: CheckGrow and CheckJoinClock passed.
  void Grow(int num_workers, int64_t join_clock, PartitionTable& partitions);

 private:
  const proto::SyncMode sync_;
  int rank_ = -1;
  std::vector<bool> live_;
  // Per worker, the clock it takes part in BSP aggregation from (0 for the job's first
  // workers; a bsp joiner's Membership.join_clock). While a bsp join is prepared, no clock past
  // hold_after_ completes, so the joiner's clock stays ahead of every completed one.
  std::vector<int64_t> joined_at_;
  std::optional<int64_t> hold_after_;
};

}  // namespace r2sp

#endif  // R2SP_SERVER_WORKER_ROSTER_H_
