// --apply_threads=auto: how many threads a server's dense updates and predicted weights use,
// from the partitions it holds and the cores it may run on. The rule, and the measurements it
// comes from, are in docs/BENCHMARKS.md#a-servers-update-work.
#ifndef R2SP_SERVER_APPLY_THREADS_H_
#define R2SP_SERVER_APPLY_THREADS_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "server/server_options.h"

namespace r2sp {

// The most threads "auto" picks. A second thread on a free core pays well and 4 threads pay
// more, but even with 16 cores to spare 8 threads gain little over 4: past 4 the memory bus,
// not the cores, sets the pace (measurements: docs/BENCHMARKS.md#a-servers-update-work).
inline constexpr int kMaxAutoApplyThreads = 4;

// The rule. A split pays only where a partition has at least two pieces
// (PartitionState::kApplyPiece elements each; smaller partitions run on the request thread
// whatever the pool) and where helpers get cores of their own: the request thread takes part,
// and the ZeroMQ I/O threads move every push and pull, so helpers = cores - io_threads - 1.
// Returns 1 + min(helpers, pieces of the largest partition - 1, kMaxAutoApplyThreads - 1),
// at least 1. `largest_partition`: elements of this server's largest partition; `cores`: the
// CPUs this process may run on; `io_threads`: the transport's ZeroMQ I/O threads.
int AutoApplyThreads(size_t largest_partition, int cores, int io_threads);

// The CPUs this process may run on (its affinity mask; at least 1).
int UsableCores();

// --apply_threads: "auto" (kAutoApplyThreads) or a count in [1, 64]; InvalidArgument saying
// what to give otherwise.
absl::StatusOr<int> ParseApplyThreads(const std::string& flag);

}  // namespace r2sp

#endif  // R2SP_SERVER_APPLY_THREADS_H_
