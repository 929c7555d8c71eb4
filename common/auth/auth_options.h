// AuthOptions: whether a binary turns CurveZMQ on (its --auth and --keys_dir, which each
// binary's main.cc defines), and the role's keys they name.
#ifndef R2SP_COMMON_AUTH_AUTH_OPTIONS_H_
#define R2SP_COMMON_AUTH_AUTH_OPTIONS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/auth/curve_keys.h"

namespace r2sp {

struct AuthOptions {
  std::string auth = "none";  // --auth. REQUIRES: none or curve
  std::string keys_dir;       // --keys_dir; curve with it empty: $R2SP_KEYS_DIR

  // OK, or InvalidArgument naming the field.
  absl::Status Validate() const;
};

// auth none: null. curve: `role`'s keys from keys_dir (or $R2SP_KEYS_DIR), or InvalidArgument
// (a configuration error, as a bad flag is: the binaries exit 2): an invalid `options`, no
// directory, a missing or malformed key, a secret key file others may read.
absl::StatusOr<std::shared_ptr<const JobKeys>> LoadAuthKeys(const AuthOptions& options,
                                                            proto::Role role);

}  // namespace r2sp

#endif  // R2SP_COMMON_AUTH_AUTH_OPTIONS_H_
