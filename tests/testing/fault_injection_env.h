// An Env (common/env.h) that fails on command, after leveldb's fault_injection_test: the Nth
// fsync, write or rename of a path under a prefix fails as a real file system would, so tests
// can show that a failed fsync, a torn write, a full disk or a failed rename is reported
// clearly and that the files written before survive. Everything else goes to the target Env.
#ifndef R2SP_TESTS_TESTING_FAULT_INJECTION_ENV_H_
#define R2SP_TESTS_TESTING_FAULT_INJECTION_ENV_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"

namespace r2sp::testing {

enum class FileFault {
  kFailedSync,     // WritableFile::Sync fails with EIO (the data was written, not synced)
  kTornWrite,      // WritableFile::Append writes the first half of its data, then fails: EIO
  kNoSpace,        // WritableFile::Append writes the first half of its data, then fails: ENOSPC
  kFailedRename,   // Env::RenameFile fails with EIO and renames nothing
  kFailedDirSync,  // Env::SyncDir fails with EIO
};

// Thread-safe.
class FaultInjectionEnv : public EnvWrapper {
 public:
  // `target` (borrowed) outlives this object.
  explicit FaultInjectionEnv(Env* target = Env::Default()) : EnvWrapper(target) {}

  // Makes the `nth` (1: the next) call that `fault` concerns, on a path that begins with
  // `path_prefix`, fail, once. The path is the file's (a rename's: its destination's).
  void Inject(FileFault fault, std::string path_prefix, int nth = 1) ABSL_LOCKS_EXCLUDED(mu_);
  // Drops the faults that have not fired yet.
  void Clear() ABSL_LOCKS_EXCLUDED(mu_);
  // How many injected faults have fired.
  int fired() const ABSL_LOCKS_EXCLUDED(mu_);

  // Whether a call that `fault` concerns, on `path`, fails now (counts the call).
  bool ShouldFail(FileFault fault, const std::string& path) ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  absl::Status RenameFile(const std::string& from, const std::string& to) override;
  absl::Status SyncDir(const std::string& path) override;

 private:
  struct Rule {
    FileFault fault;
    std::string path_prefix;
    int calls_left;  // matching calls before the one that fails
  };

  mutable absl::Mutex mu_;
  std::vector<Rule> rules_ ABSL_GUARDED_BY(mu_);
  int fired_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace r2sp::testing

#endif  // R2SP_TESTS_TESTING_FAULT_INJECTION_ENV_H_
