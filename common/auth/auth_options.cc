// See auth_options.h.
#include "common/auth/auth_options.h"

#include <cstdlib>

#include "common/option_checker.h"
#include "common/status_macros.h"

namespace r2sp {

absl::Status AuthOptions::Validate() const {
  OptionChecker c("AuthOptions");
  c.Check(auth == "none" || auth == "curve", "--auth", "auth", "none or curve", auth);
  return c.status();
}

absl::StatusOr<std::shared_ptr<const JobKeys>> LoadAuthKeys(const AuthOptions& options,
                                                            proto::Role role) {
  R2SP_RETURN_IF_ERROR(options.Validate());
  if (options.auth == "none") return std::shared_ptr<const JobKeys>();
  std::string dir = options.keys_dir;
  if (dir.empty()) {
    const char* env = std::getenv("R2SP_KEYS_DIR");
    if (env != nullptr) dir = env;
  }
  if (dir.empty()) {
    return absl::InvalidArgumentError(
        "--auth=curve needs --keys_dir (or R2SP_KEYS_DIR): the job's keys, from tools/keygen");
  }
  absl::StatusOr<JobKeys> keys = LoadJobKeys(dir, role);
  if (!keys.ok()) return absl::InvalidArgumentError(keys.status().message());
  return std::make_shared<const JobKeys>(*std::move(keys));
}

}  // namespace r2sp
