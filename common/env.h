// The file system as the code that must survive crashes sees it, after leveldb's Env: the few
// operations that checkpoints, model files and saved epoch plans need, behind an interface, so
// that tests can swap in an Env that fails an fsync, tears a write, runs out of space or fails
// a rename (tests/testing/fault_injection_env.h). Env::Default() is the POSIX file system;
// EnvWrapper forwards every call to another Env, for subclasses that change a few of them.
//
// Errors are FileError(...): a code for the errno (ENOENT NotFound; ENOSPC and EDQUOT, a full
// disk, ResourceExhausted; EACCES, EPERM and EROFS PermissionDenied; any other, EIO included,
// Unavailable, as every file error was before) and the message
// "cannot <operation> <path>: <strerror>", naming the file and what was being done to it.
#ifndef R2SP_COMMON_ENV_H_
#define R2SP_COMMON_ENV_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace r2sp {

// The error an Env returns when `operation` ("write", "fsync", "rename A to", ...) on `path`
// failed with `error_number` (an errno value).
absl::Status FileError(absl::string_view operation, absl::string_view path, int error_number);

// A file being written. Not thread-safe: one writer.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Appends all of `data` (a failed call may have written part of it).
  virtual absl::Status Append(absl::string_view data) = 0;
  // Makes what was appended durable (fsync).
  virtual absl::Status Sync() = 0;
  // Closes the file; once called, no other call. The destructor closes a file not closed,
  // ignoring errors.
  virtual absl::Status Close() = 0;
};

// Thread-safe: every implementation may be called from several threads at once.
class Env {
 public:
  virtual ~Env() = default;

  // The POSIX file system. Never deleted.
  static Env* Default();

  // Creates `path`, or truncates it if it exists, for writing.
  virtual absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path) = 0;
  // The whole contents of `path`; NotFound if it does not exist.
  virtual absl::StatusOr<std::string> ReadFile(const std::string& path) = 0;
  // The names (not paths) of the entries of directory `dir`, in no order, without "." and "..".
  virtual absl::StatusOr<std::vector<std::string>> GetChildren(const std::string& dir) = 0;
  // Whether `path` is a directory (false if it does not exist or cannot be examined).
  virtual bool IsDirectory(const std::string& path) = 0;
  // Creates directory `path` and any missing parents; OK if it exists.
  virtual absl::Status CreateDirs(const std::string& path) = 0;
  // Renames `from` to `to` atomically, replacing a file `to` or an empty directory `to`.
  virtual absl::Status RenameFile(const std::string& from, const std::string& to) = 0;
  // Removes `path` and, if it is a directory, everything under it; OK if it does not exist.
  virtual absl::Status RemoveAll(const std::string& path) = 0;
  // Fsyncs directory `path`, making the entries created, renamed or removed in it durable.
  virtual absl::Status SyncDir(const std::string& path) = 0;
};

// An Env that forwards every call to `target` (borrowed; it outlives this object). Subclasses
// override what they change, as leveldb's EnvWrapper.
class EnvWrapper : public Env {
 public:
  explicit EnvWrapper(Env* target) : target_(target) {}

  Env* target() const { return target_; }

  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    return target_->NewWritableFile(path);
  }
  absl::StatusOr<std::string> ReadFile(const std::string& path) override {
    return target_->ReadFile(path);
  }
  absl::StatusOr<std::vector<std::string>> GetChildren(const std::string& dir) override {
    return target_->GetChildren(dir);
  }
  bool IsDirectory(const std::string& path) override { return target_->IsDirectory(path); }
  absl::Status CreateDirs(const std::string& path) override { return target_->CreateDirs(path); }
  absl::Status RenameFile(const std::string& from, const std::string& to) override {
    return target_->RenameFile(from, to);
  }
  absl::Status RemoveAll(const std::string& path) override { return target_->RemoveAll(path); }
  absl::Status SyncDir(const std::string& path) override { return target_->SyncDir(path); }

 private:
  Env* const target_;
};

}  // namespace r2sp

#endif  // R2SP_COMMON_ENV_H_
