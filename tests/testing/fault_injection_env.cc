// See fault_injection_env.h.
#include "tests/testing/fault_injection_env.h"

#include <cerrno>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace r2sp::testing {
namespace {

// A file whose appends and syncs may fail as its Env says.
class FaultyFile : public WritableFile {
 public:
  FaultyFile(FaultInjectionEnv* env, std::string path, std::unique_ptr<WritableFile> file)
      : env_(env), path_(std::move(path)), file_(std::move(file)) {}

  absl::Status Append(absl::string_view data) override {
    const bool torn = env_->ShouldFail(FileFault::kTornWrite, path_);
    const bool full = !torn && env_->ShouldFail(FileFault::kNoSpace, path_);
    if (!torn && !full) return file_->Append(data);
    // Part of the data reaches the file, as when a write is cut short.
    file_->Append(data.substr(0, data.size() / 2)).IgnoreError();
    return FileError("write", path_, torn ? EIO : ENOSPC);
  }

  absl::Status Sync() override {
    if (env_->ShouldFail(FileFault::kFailedSync, path_)) return FileError("fsync", path_, EIO);
    return file_->Sync();
  }

  absl::Status Close() override { return file_->Close(); }

 private:
  FaultInjectionEnv* const env_;
  const std::string path_;
  const std::unique_ptr<WritableFile> file_;
};

}  // namespace

void FaultInjectionEnv::Inject(FileFault fault, std::string path_prefix, int nth) {
  absl::MutexLock lock(&mu_);
  rules_.push_back(Rule{fault, std::move(path_prefix), nth - 1});
}

void FaultInjectionEnv::Clear() {
  absl::MutexLock lock(&mu_);
  rules_.clear();
}

int FaultInjectionEnv::fired() const {
  absl::MutexLock lock(&mu_);
  return fired_;
}

bool FaultInjectionEnv::ShouldFail(FileFault fault, const std::string& path) {
  absl::MutexLock lock(&mu_);
  for (auto it = rules_.begin(); it != rules_.end(); ++it) {
    if (it->fault != fault || !absl::StartsWith(path, it->path_prefix)) continue;
    if (it->calls_left-- > 0) continue;
    rules_.erase(it);
    ++fired_;
    return true;
  }
  return false;
}

absl::StatusOr<std::unique_ptr<WritableFile>> FaultInjectionEnv::NewWritableFile(
    const std::string& path) {
  absl::StatusOr<std::unique_ptr<WritableFile>> file = target()->NewWritableFile(path);
  if (!file.ok()) return file;
  return std::make_unique<FaultyFile>(this, path, *std::move(file));
}

absl::Status FaultInjectionEnv::RenameFile(const std::string& from, const std::string& to) {
  if (ShouldFail(FileFault::kFailedRename, to)) {
    return FileError(absl::StrCat("rename ", from, " to"), to, EIO);
  }
  return target()->RenameFile(from, to);
}

absl::Status FaultInjectionEnv::SyncDir(const std::string& path) {
  if (ShouldFail(FileFault::kFailedDirSync, path)) {
    return FileError("fsync directory", path, EIO);
  }
  return target()->SyncDir(path);
}

}  // namespace r2sp::testing
