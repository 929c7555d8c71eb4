// See worker_roster.h.
#include "server/worker_roster.h"

#include "absl/strings/str_cat.h"
#include "common/sync_modes.h"
#include "glog/logging.h"

namespace r2sp {

void WorkerRoster::Reset(int rank, int num_workers) {
  rank_ = rank;
  live_.assign(num_workers, true);
  joined_at_.assign(num_workers, 0);
  hold_after_.reset();
}

bool WorkerRoster::Depart(const std::vector<int>& departed) {
  bool changed = false;
  for (int w : departed) {
    if (w >= 0 && w < num_workers() && live_[w]) {
      live_[w] = false;
      changed = true;
      LOG(INFO) << "server " << rank_ << ": worker " << w << " left; no longer waiting for it";
    }
  }
  return changed;
}

absl::StatusOr<int64_t> WorkerRoster::Prepare(const PartitionTable& partitions) {
  if (RoundSynchronous(sync_)) {
    if (!hold_after_.has_value()) {
      const int64_t open = partitions.OpenClock();
      hold_after_ = open;
      LOG(INFO) << "server " << rank_ << ": a worker joins; clocks past " << open << " wait for it";
    }
    return *hold_after_ + 1;
  }
  if (sync_ == proto::SSP) return partitions.LeadingClock(live_);
  return absl::FailedPreconditionError(
      "MEMBERSHIP prepare is for bsp and ssp joins (asp and r2sp workers join at once)");
}

bool WorkerRoster::EndHold() {
  if (!hold_after_.has_value()) return false;
  hold_after_.reset();
  return true;
}

absl::Status WorkerRoster::CheckGrow(const proto::Membership& membership) const {
  const int num_workers = membership.num_workers();
  if (num_workers < this->num_workers() || num_workers > this->num_workers() + kMaxNewWorkers) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot go from ", this->num_workers(), " to ", num_workers, " workers"));
  }
  if (membership.worker_ids_size() != num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("MEMBERSHIP names ", num_workers,
                                                   " workers but carries ",
                                                   membership.worker_ids_size(), " ids"));
  }
  const int64_t join_clock = membership.join_clock();
  if (join_clock < 0 || join_clock > kMaxJoinClock) {
    return absl::InvalidArgumentError(
        absl::StrCat("MEMBERSHIP: join clock ", join_clock, " out of range"));
  }
  return absl::OkStatus();
}

absl::Status WorkerRoster::CheckJoinClock(int64_t join_clock,
                                          const PartitionTable& partitions) const {
  if (!RoundSynchronous(sync_)) return absl::OkStatus();
  absl::Status status;
  partitions.ForEach([&](uint64_t key, const HeldPartition& held) {
    // A clock from join_clock on that completed without the joiner would break bsp.
    if (status.ok() && held.aggregator->clock() > join_clock) {
      status = absl::FailedPreconditionError(
          absl::StrCat("a worker cannot join at clock ", join_clock, ": partition ", key,
                       " is at clock ", held.aggregator->clock(), " already"));
    }
  });
  return status;
}

void WorkerRoster::Grow(int num_workers, int64_t join_clock, PartitionTable& partitions) {
  const bool ssp = sync_ == proto::SSP;
  partitions.AddWorkers(num_workers, ssp ? join_clock : 0);
  live_.resize(num_workers, true);
  joined_at_.resize(num_workers, join_clock);
}

}  // namespace r2sp
