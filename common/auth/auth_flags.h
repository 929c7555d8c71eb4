// The flags that turn CurveZMQ on for a binary (--auth, --keys_dir), defined once for the
// scheduler, servers, workers and benchmarks.
#ifndef R2SP_COMMON_AUTH_AUTH_FLAGS_H_
#define R2SP_COMMON_AUTH_AUTH_FLAGS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/auth/curve_keys.h"

namespace r2sp {

// --auth=none: null. --auth=curve: `role`'s keys from --keys_dir (or $R2SP_KEYS_DIR), or the
// error that stops the process (no directory, a missing or malformed key, a secret key file
// others may read).
absl::StatusOr<std::shared_ptr<const JobKeys>> CurveKeysFromFlags(proto::Role role);

}  // namespace r2sp

#endif  // R2SP_COMMON_AUTH_AUTH_FLAGS_H_
