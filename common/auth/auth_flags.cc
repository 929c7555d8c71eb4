// See auth_flags.h.
#include "common/auth/auth_flags.h"

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "gflags/gflags.h"

DEFINE_string(auth, "none", "none, or curve: CurveZMQ encryption and authentication with the "
              "job's keys (tools/keygen; docs/SECURITY.md)");
DEFINE_string(keys_dir, "", "with --auth=curve: the directory of the job's keys (default: "
              "$R2SP_KEYS_DIR)");

namespace r2sp {

absl::StatusOr<std::shared_ptr<const JobKeys>> CurveKeysFromFlags(proto::Role role) {
  if (FLAGS_auth == "none") return std::shared_ptr<const JobKeys>();
  if (FLAGS_auth != "curve") {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth must be none or curve, not ", FLAGS_auth));
  }
  std::string dir = FLAGS_keys_dir;
  if (dir.empty()) {
    const char* env = std::getenv("R2SP_KEYS_DIR");
    if (env != nullptr) dir = env;
  }
  if (dir.empty()) {
    return absl::InvalidArgumentError(
        "--auth=curve needs --keys_dir (or R2SP_KEYS_DIR): the job's keys, from tools/keygen");
  }
  absl::StatusOr<JobKeys> keys = LoadJobKeys(dir, role);
  // A configuration error, as a bad flag is: the binaries exit 2.
  if (!keys.ok()) return absl::InvalidArgumentError(keys.status().message());
  return std::make_shared<const JobKeys>(*std::move(keys));
}

}  // namespace r2sp
