// See live_shards.h.
#include "common/live_shards.h"

#include "absl/strings/str_cat.h"

namespace r2sp {

absl::Status CheckLiveShards(absl::Span<const int> live, int world) {
  if (live.empty()) return absl::InvalidArgumentError("no live shard");
  for (size_t i = 0; i < live.size(); ++i) {
    if (live[i] < 0 || live[i] >= world || (i > 0 && live[i] <= live[i - 1])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the live shards are not ascending, distinct shards of ", world));
    }
  }
  return absl::OkStatus();
}

}  // namespace r2sp
