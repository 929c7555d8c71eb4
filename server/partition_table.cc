// See partition_table.h.
#include "server/partition_table.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace r2sp {

PartitionTable::PartitionTable(const ModelLayout& layout, int rank, int num_workers, bool bsp,
                               RangePool* pool)
    : rank_(rank) {
  for (uint64_t key : layout.KeysOf(rank)) {
    const Partition& p = *layout.Find(key);
    auto held = std::make_unique<HeldPartition>(p.num_elements, num_workers);
    held->state.set_pool(pool);
    if (bsp) held->aggregator = std::make_unique<ClockAggregator>(p.num_elements, num_workers);
    partitions_.emplace(key, std::move(held));
  }
}

absl::StatusOr<HeldPartition*> PartitionTable::Find(uint64_t key) {
  auto it = partitions_.find(key);
  if (it == partitions_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("key ", key, " is not held by server ", rank_));
  }
  return it->second.get();
}

const HeldPartition* PartitionTable::Get(uint64_t key) const {
  auto it = partitions_.find(key);
  return it == partitions_.end() ? nullptr : it->second.get();
}

void PartitionTable::ForEach(const std::function<void(uint64_t, HeldPartition&)>& fn) {
  for (auto& [key, held] : partitions_) fn(key, *held);
}

void PartitionTable::ForEach(const std::function<void(uint64_t, const HeldPartition&)>& fn) const {
  for (const auto& [key, held] : partitions_) fn(key, *held);
}

bool PartitionTable::Ready(const HeldPartition& held, int64_t min_version, int64_t min_clock,
                           const std::vector<bool>& live) {
  if (!held.state.initialized() || held.state.version() < min_version) return false;
  if (min_clock > 0) {
    for (size_t w = 0; w < live.size(); ++w) {
      if (live[w] && held.pushed[w] < min_clock) return false;
    }
  }
  return true;
}

absl::Status PartitionTable::Park(HeldPartition& held, ParkedPull& pull, const Clock& clock) {
  // A worker parks at most kMaxParkedPulls pulls per partition, so a peer can park no more
  // here than that many per partition held.
  int parked = 0;
  for (const ParkedPull& p : held.parked_pulls) parked += p.request.rank == pull.request.rank;
  if (parked >= kMaxParkedPulls) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", pull.request.rank, " has ", parked,
                                                      " pulls of partition ", pull.request.key,
                                                      " waiting already"));
  }
  pull.since = clock();
  held.parked_pulls.push_back(std::move(pull));
  return absl::OkStatus();
}

void PartitionTable::ReleaseReady(HeldPartition& held, const std::vector<bool>& live,
                                  const Clock& clock, const Answer& answer) {
  if (held.parked_pulls.empty() || !held.state.initialized()) return;
  std::vector<ParkedPull> still_waiting;
  const absl::Time now = clock();
  for (ParkedPull& pull : held.parked_pulls) {
    if (Ready(held, pull.request.min_version, pull.request.min_clock, live)) {
      answer(held, pull, absl::ToDoubleSeconds(now - pull.since));
    } else {
      still_waiting.push_back(std::move(pull));
    }
  }
  held.parked_pulls = std::move(still_waiting);
}

void PartitionTable::AddWorkers(int num_workers, int64_t first_pushed) {
  for (auto& [key, held] : partitions_) {
    held->pushed.resize(num_workers, first_pushed);
    held->asked.resize(num_workers);
    if (held->aggregator != nullptr) held->aggregator->AddWorkers(num_workers);
  }
}

int64_t PartitionTable::OpenClock() const {
  int64_t open = 0;
  for (const auto& [key, held] : partitions_) {
    if (held->aggregator != nullptr) open = std::max(open, held->aggregator->clock());
  }
  return open;
}

int64_t PartitionTable::LeadingClock(const std::vector<bool>& live) const {
  int64_t leading = 0;
  for (const auto& [key, held] : partitions_) {
    for (size_t w = 0; w < live.size(); ++w) {
      if (live[w]) leading = std::max(leading, held->pushed[w]);
    }
  }
  return leading;
}

double PartitionTable::Steps() const {
  double steps = std::numeric_limits<double>::infinity();
  for (const auto& [key, held] : partitions_) steps = std::min(steps, held->steps);
  return partitions_.empty() ? 0.0 : steps;
}

bool PartitionTable::Initialized() const {
  for (const auto& [key, held] : partitions_) {
    if (!held->state.initialized()) return false;
  }
  return true;
}

}  // namespace r2sp
