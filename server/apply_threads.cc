// See apply_threads.h.
#include "server/apply_threads.h"

#include <sched.h>

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/partition_state.h"

namespace r2sp {

int AutoApplyThreads(size_t largest_partition, int cores, int io_threads) {
  const size_t pieces = largest_partition / PartitionState::kApplyPiece;
  if (pieces < 2) return 1;  // PartitionState::ForRange would not split it
  const int helpers = cores - io_threads - 1;
  if (helpers <= 0) return 1;
  const size_t most = std::min<size_t>(pieces - 1, kMaxAutoApplyThreads - 1);
  return 1 + static_cast<int>(std::min<size_t>(static_cast<size_t>(helpers), most));
}

int UsableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

absl::StatusOr<int> ParseApplyThreads(const std::string& flag) {
  if (flag == "auto") return kAutoApplyThreads;
  int threads = 0;
  if (!absl::SimpleAtoi(flag, &threads) || threads < 1 || threads > 64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--apply_threads=", flag, ": give auto, or a thread count from 1 to 64"));
  }
  return threads;
}

}  // namespace r2sp
