// ServerHandler's checkpoints (server_handler.h): the snapshot of the shard a checkpoint
// stores, and the restore of one before the server starts serving.
#include <cstring>
#include <limits>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "server/server_handler.h"

namespace r2sp {
namespace {

std::string FloatBytes(const float* values, size_t n) {
  return std::string(reinterpret_cast<const char*>(values), n * sizeof(float));
}

}  // namespace

proto::ShardCheckpoint ServerHandler::Snapshot() const {
  absl::MutexLock lock(&mu_);
  proto::ShardCheckpoint shard;
  for (const auto& [key, held] : partitions_) {
    proto::PartitionCheckpoint* p = shard.add_partitions();
    const PartitionState& state = held->state;
    p->set_key(key);
    p->set_version(state.version());
    p->set_steps(held->steps);
    if (held->aggregator != nullptr) p->set_clock(held->aggregator->clock());
    p->set_weights(FloatBytes(state.weights(), state.num_elements()));
    if (options_.sgd.momentum > 0) {
      p->set_momentum(FloatBytes(state.momentum(), state.num_elements()));
    }
  }
  return shard;
}

double ServerHandler::Steps() const {
  absl::MutexLock lock(&mu_);
  double steps = std::numeric_limits<double>::infinity();
  for (const auto& [key, held] : partitions_) steps = std::min(steps, held->steps);
  return partitions_.empty() ? 0.0 : steps;
}

bool ServerHandler::Initialized() const {
  absl::MutexLock lock(&mu_);
  for (const auto& [key, held] : partitions_) {
    if (!held->state.initialized()) return false;
  }
  return true;
}

absl::Status ServerHandler::Restore(const proto::ShardCheckpoint& shard) {
  absl::MutexLock lock(&mu_);
  CHECK(configured_) << "ServerHandler::Restore before Configure";
  // Validate everything before changing anything.
  absl::flat_hash_set<uint64_t> seen;
  for (const proto::PartitionCheckpoint& p : shard.partitions()) {
    auto it = partitions_.find(p.key());
    if (it == partitions_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the checkpoint holds partition ", p.key(), ", not one of server ", rank_,
                       "'s"));
    }
    if (!seen.insert(p.key()).second) {
      return absl::InvalidArgumentError(absl::StrCat("partition ", p.key(), " twice"));
    }
    const size_t bytes = it->second->state.bytes();
    if (p.weights().size() != bytes || (!p.momentum().empty() && p.momentum().size() != bytes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "partition ", p.key(), " has ", p.weights().size(), " bytes of weights and ",
          p.momentum().size(), " of momentum; it needs ", bytes));
    }
    if (p.version() < 0 || !(p.steps() >= 0 && p.steps() < 1e15) || p.clock() < 0) {
      return absl::InvalidArgumentError(absl::StrCat("partition ", p.key(), "'s counters are "
                                                     "out of range"));
    }
  }
  if (seen.size() != partitions_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the checkpoint holds ", seen.size(), " of "
                                                   "the shard's ", partitions_.size(),
                                                   " partitions"));
  }
  for (const proto::PartitionCheckpoint& p : shard.partitions()) {
    HeldPartition& held = *partitions_[p.key()];
    std::vector<float> weights(held.state.num_elements()), momentum;
    std::memcpy(weights.data(), p.weights().data(), p.weights().size());
    if (!p.momentum().empty()) {
      momentum.resize(held.state.num_elements());
      std::memcpy(momentum.data(), p.momentum().data(), p.momentum().size());
    }
    held.state.Restore(weights.data(), momentum.empty() ? nullptr : momentum.data(),
                       p.version());
    held.steps = p.steps();
    held.restored_steps = p.steps();
    if (held.aggregator != nullptr) {
      held.aggregator->ResetTo(p.clock());
      held.restored_clock = p.clock();
    }
    // Every worker restarts at the same clock (the least advanced partition's steps): the ssp
    // bounds count from there, whatever each worker had pushed before.
    for (int64_t& n : held.pushed) n = static_cast<int64_t>(p.steps() + 1e-6);
  }
  LOG(INFO) << "server " << rank_ << " restored " << partitions_.size() << " partitions";
  return absl::OkStatus();
}

}  // namespace r2sp
