// See shard_checkpoint.h.
#include "server/shard_checkpoint.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace r2sp {
namespace {

std::string FloatBytes(const float* values, size_t n) {
  return std::string(reinterpret_cast<const char*>(values), n * sizeof(float));
}

// Whether `p` fits `held` (sizes, counters in range).
absl::Status CheckPartition(const proto::PartitionCheckpoint& p, const HeldPartition& held) {
  const size_t bytes = held.state.bytes();
  const auto fits = [bytes](const std::string& values) {
    return values.empty() || values.size() == bytes;
  };
  if (p.weights().size() != bytes || !fits(p.momentum()) || !fits(p.second_moment())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "partition ", p.key(), " has ", p.weights().size(), " bytes of weights, ",
        p.momentum().size(), " of momentum and ", p.second_moment().size(),
        " of second moment; it needs ", bytes));
  }
  const bool updates_fit = !p.has_updates() || (p.updates() >= 0 && p.updates() <= p.version());
  if (p.version() < 0 || !(p.steps() >= 0 && p.steps() < 1e15) || p.clock() < 0 ||
      !updates_fit) {
    return absl::InvalidArgumentError(
        absl::StrCat("partition ", p.key(), "'s counters are out of range"));
  }
  return absl::OkStatus();
}

absl::Status CheckShard(const proto::ShardCheckpoint& shard, PartitionTable& partitions) {
  absl::flat_hash_set<uint64_t> seen;
  for (const proto::PartitionCheckpoint& p : shard.partitions()) {
    absl::StatusOr<HeldPartition*> held = partitions.Find(p.key());
    if (!held.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("the checkpoint holds partition ", p.key(),
                                                     ", not one of server ", partitions.rank(),
                                                     "'s"));
    }
    if (!seen.insert(p.key()).second) {
      return absl::InvalidArgumentError(absl::StrCat("partition ", p.key(), " twice"));
    }
    R2SP_RETURN_IF_ERROR(CheckPartition(p, **held));
  }
  if (seen.size() != partitions.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the checkpoint holds ", seen.size(),
                                                   " of the shard's ", partitions.size(),
                                                   " partitions"));
  }
  return absl::OkStatus();
}

// The floats in `bytes` (aligned), empty for none.
std::vector<float> Floats(const std::string& bytes) {
  std::vector<float> values(bytes.size() / sizeof(float));
  if (!values.empty()) std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

const float* DataOrNull(const std::vector<float>& values) {
  return values.empty() ? nullptr : values.data();
}

void InstallPartition(const proto::PartitionCheckpoint& p, HeldPartition& held) {
  const std::vector<float> weights = Floats(p.weights());
  const std::vector<float> momentum = Floats(p.momentum());
  const std::vector<float> second = Floats(p.second_moment());
  held.state.Restore(weights.data(), DataOrNull(momentum), DataOrNull(second), p.version(),
                     p.has_updates() ? p.updates() : p.version());
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

}  // namespace

proto::ShardCheckpoint SnapshotShard(const PartitionTable& partitions, bool momentum) {
  proto::ShardCheckpoint shard;
  partitions.ForEach([&](uint64_t key, const HeldPartition& held) {
    *shard.add_partitions() = SnapshotPartition(key, held, momentum, /*weights=*/true);
  });
  return shard;
}

proto::PartitionCheckpoint SnapshotPartition(uint64_t key, const HeldPartition& held,
                                             bool momentum, bool weights) {
  proto::PartitionCheckpoint p;
  const PartitionState& state = held.state;
  p.set_key(key);
  p.set_version(state.version());
  p.set_updates(state.updates());
  p.set_steps(held.steps);
  if (held.aggregator != nullptr) p.set_clock(held.aggregator->clock());
  if (weights) p.set_weights(FloatBytes(state.weights(), state.num_elements()));
  // A script's optimizer keeps a first moment (SGD's momentum, Adam's exp_avg) in any mode,
  // its SGD with momentum on the server's own path (script_sgd) too.
  const bool script_momentum = held.script_sgd.has_value() && held.script_sgd->momentum > 0;
  if (momentum || state.keeps_script_state() || script_momentum) {
    p.set_momentum(FloatBytes(state.momentum(), state.num_elements()));
  }
  if (state.second_moment() != nullptr) {
    p.set_second_moment(FloatBytes(state.second_moment(), state.num_elements()));
  }
  return p;
}

absl::Status RestoreShard(const proto::ShardCheckpoint& shard, PartitionTable& partitions) {
  R2SP_RETURN_IF_ERROR(CheckShard(shard, partitions));  // before changing anything
  for (const proto::PartitionCheckpoint& p : shard.partitions()) {
    InstallPartition(p, **partitions.Find(p.key()));
  }
  return absl::OkStatus();
}

absl::Status RestorePartition(const proto::PartitionCheckpoint& p, HeldPartition& held) {
  R2SP_RETURN_IF_ERROR(CheckPartition(p, held));
  InstallPartition(p, held);
  return absl::OkStatus();
}

}  // namespace r2sp
