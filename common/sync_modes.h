// Which consistency modes share which behaviour, so that servers, scheduler and workers ask
// one place instead of listing modes (docs/MODES.md), and the modes' names.
#ifndef R2SP_COMMON_SYNC_MODES_H_
#define R2SP_COMMON_SYNC_MODES_H_

#include <string>

#include "absl/status/statusor.h"
#include "proto/messages.pb.h"

namespace r2sp {

// A mode's name as --sync spells it (bsp, ssp, asp, r2sp, easgd, eawild; any case), and back.
absl::StatusOr<proto::SyncMode> ParseSyncMode(const std::string& name);
std::string SyncModeName(proto::SyncMode mode);

// Servers sum one push per live worker and clock (a round), then apply the sum once; pulls wait
// for the rounds they need (PullInfo.min_version); joiners join at a round boundary; a lost
// server fails the job. bsp (gradients) and easgd (elastic differences).
inline bool RoundSynchronous(proto::SyncMode sync) {
  return sync == proto::BSP || sync == proto::EASGD;
}

// Elastic averaging: workers keep their own parameters and run the optimizer themselves; a push
// is an elastic difference that servers add to the centre as it is (no optimizer on the server).
inline bool Elastic(proto::SyncMode sync) {
  return sync == proto::EASGD || sync == proto::EAWILD;
}

}  // namespace r2sp

#endif  // R2SP_COMMON_SYNC_MODES_H_
