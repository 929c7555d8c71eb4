// A server's shard as a checkpoint stores it (proto ShardCheckpoint): taken from the partitions
// it holds, and restored into them before the server serves its first request. A restore
// validates the whole checkpoint before it changes anything.
#ifndef R2SP_SERVER_SHARD_CHECKPOINT_H_
#define R2SP_SERVER_SHARD_CHECKPOINT_H_

#include "absl/status/status.h"
#include "proto/checkpoint.pb.h"
#include "server/partition_table.h"

namespace r2sp {

// Every partition's weights, version, steps and (BSP) clock; its momentum with `momentum` or
// a script's optimizer that keeps one, and Adam's second moment where it has one.
proto::ShardCheckpoint SnapshotShard(const PartitionTable& partitions, bool momentum);

// Installs `shard` into `partitions`: every held partition must be in it once, with its size
// and counters in range (else InvalidArgument, and nothing changes). Each partition takes the
// checkpoint's weights, momentum (zeros if absent), version, steps and clock, and every worker
// counts as having pushed it steps times (all restart at the same clock).
absl::Status RestoreShard(const proto::ShardCheckpoint& shard, PartitionTable& partitions);

// Partition `key`'s checkpoint as SnapshotShard takes it; without its weights unless `weights`.
proto::PartitionCheckpoint SnapshotPartition(uint64_t key, const HeldPartition& held,
                                             bool momentum, bool weights);

// Installs one partition's checkpoint as RestoreShard does, once it fits `held` (sizes and
// counters; InvalidArgument otherwise, and nothing changes).
absl::Status RestorePartition(const proto::PartitionCheckpoint& p, HeldPartition& held);

}  // namespace r2sp

#endif  // R2SP_SERVER_SHARD_CHECKPOINT_H_
