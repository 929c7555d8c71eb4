// The partitions a server holds, each with what its sync mode keeps about it (the weights, BSP's
// clock aggregator, each worker's pushes, fp16-delta shadows, steps), and the pulls parked on
// each until the version (BSP) or clock (SSP) they wait for exists. ServerHandler decides when
// to look again (after a push, a completed clock, a departed worker, the end of a join hold);
// this table says which parked pulls are ready and hands them back to be answered.
#ifndef R2SP_SERVER_PARTITION_TABLE_H_
#define R2SP_SERVER_PARTITION_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/handler.h"
#include "common/model_layout.h"
#include "common/wire/optimizer_runs.h"
#include "common/wire/pull_frames.h"
#include "server/clock_aggregator.h"
#include "server/partition_state.h"
#include "server/pull_shadows.h"
#include "server/range_pool.h"

namespace r2sp {

// A pull waiting for its partition's version or clock.
struct ParkedPull {
  wire::PullRequest request;
  absl::Time since;  // when it was parked
  Responder responder;
};

// One partition this server holds, with what its mode keeps about it.
struct HeldPartition {
  // The prediction a worker's latest predicted pull asked for (updates 0: none).
  struct PredictAsk {
    float fraction = 0.0f;
    int updates = 0;
  };
  HeldPartition(size_t n, int workers) : state(n), pushed(workers, 0), asked(workers) {}
  PartitionState state;
  std::unique_ptr<ClockAggregator> aggregator;  // BSP only
  // Per worker: the pushes it made (SSP bounds; in asynchronous modes a worker's clock counts
  // its pushes, so after a restore its next push sets it: pushed is past the clock of every
  // push applied). A push marked as a retry (proto PushInfo.retry) of a clock below it was
  // applied already (the worker lost the reply when its connection was reset), so it is
  // acknowledged and not applied again.
  std::vector<int64_t> pushed;
  // Per worker: what its latest predicted pull asked for, which its next asynchronous push
  // computes in the update's pass (PartitionState::ApplyForeseeing) for the pull after it.
  std::vector<PredictAsk> asked;
  std::vector<ParkedPull> parked_pulls;
  std::unique_ptr<PullShadows> shadows;  // once a worker pulls FP16_DELTA
  double steps = 0;  // global-batch steps applied (fractions in asynchronous modes)
  // BSP after a restore: the clock the checkpoint was aggregating. Workers resume at the
  // least advanced partition's clock, so this one may get pushes for earlier clocks, which
  // its weights hold already: they are acknowledged and dropped.
  int64_t restored_clock = 0;
  double restored_steps = 0;  // the checkpoint's steps (0: not restored)
  // The training script's optimizer, as its latest push gave it (empty: the server's own), and
  // the same as the server's own SGD where it is that (script_optimizer.h AsServerSgd).
  std::vector<wire::OptimizerRun> script_runs;
  std::optional<SgdOptions> script_sgd;
};

// Thread-safety: none; the owner (ServerHandler) serialises every call under its mutex.
class PartitionTable {
 public:
  // Pulls one worker may have parked per partition (a worker needs one).
  static constexpr int kMaxParkedPulls = 4;
  using Answer = std::function<void(HeldPartition& held, ParkedPull& pull, double waited)>;
  using Clock = std::function<absl::Time()>;

  PartitionTable() = default;  // holds nothing (a server not configured yet)
  // The partitions `layout` gives server `rank`, for `num_workers` workers; with `bsp`, each
  // gets a clock aggregator. `pool` (may be null) outlives the table.
  PartitionTable(const ModelLayout& layout, int rank, int num_workers, bool bsp, RangePool* pool);

  int rank() const { return rank_; }
  size_t size() const { return partitions_.size(); }
  // The partition with `key`; InvalidArgument if this server does not hold it.
  absl::StatusOr<HeldPartition*> Find(uint64_t key);
  // The same, read-only; null if not held.
  const HeldPartition* Get(uint64_t key) const;
  // Calls fn(key, held) for every partition, in no particular order.
  void ForEach(const std::function<void(uint64_t, HeldPartition&)>& fn);
  void ForEach(const std::function<void(uint64_t, const HeldPartition&)>& fn) const;

  // Whether a pull for (min_version, min_clock) of `held` may be answered now: the partition is
  // initialised, at least at min_version, and (min_clock > 0) every worker w with live[w] has
  // pushed it min_clock times.
  static bool Ready(const HeldPartition& held, int64_t min_version, int64_t min_clock,
                    const std::vector<bool>& live);
  // Parks `pull` on `held`, parked since clock() (asked only once it is parked);
  // FailedPrecondition (and `pull` untouched) if its worker has kMaxParkedPulls there already.
  static absl::Status Park(HeldPartition& held, ParkedPull& pull, const Clock& clock);
  // Answers, through `answer`, the pulls parked on `held` that are Ready now (each with the
  // seconds it waited, by clock(), asked only when a pull is parked), in the order they came;
  // keeps the others parked.
  static void ReleaseReady(HeldPartition& held, const std::vector<bool>& live, const Clock& clock,
                           const Answer& answer);

  // Workers joined: every partition's pushes and aggregator take ranks up to num_workers - 1,
  // the new ones counted as having pushed `first_pushed` times.
  void AddWorkers(int num_workers, int64_t first_pushed);
  // BSP: the most advanced clock any partition aggregates (0 for none).
  int64_t OpenClock() const;
  // The most pushes any live worker made of any partition (the clock the most advanced pushes
  // next, in SSP).
  int64_t LeadingClock(const std::vector<bool>& live) const;
  // The global-batch steps of the least advanced partition (0 for none).
  double Steps() const;
  // Whether every partition has its initial value.
  bool Initialized() const;

 private:
  int rank_ = -1;
  absl::flat_hash_map<uint64_t, std::unique_ptr<HeldPartition>> partitions_;
};

}  // namespace r2sp

#endif  // R2SP_SERVER_PARTITION_TABLE_H_
