// The POSIX Env (see env.h): open/write/fsync/close on file descriptors, directories through
// std::filesystem (whose std::error_code carries the errno).
#include "common/env.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"

namespace r2sp {
namespace {

namespace fs = std::filesystem;

class PosixWritableFile : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  absl::Status Append(absl::string_view data) override {
    while (!data.empty()) {
      const ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return FileError("write", path_, errno);
      if (n == 0) return FileError("write", path_, EIO);
      data.remove_prefix(static_cast<size_t>(n));
    }
    return absl::OkStatus();
  }

  absl::Status Sync() override {
    if (::fsync(fd_) != 0) return FileError("fsync", path_, errno);
    return absl::OkStatus();
  }

  absl::Status Close() override {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return FileError("close", path_, errno);
    return absl::OkStatus();
  }

 private:
  const std::string path_;
  int fd_;
};

class PosixEnv : public Env {
 public:
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return FileError("create", path, errno);
    return std::make_unique<PosixWritableFile>(path, fd);
  }

  absl::StatusOr<std::string> ReadFile(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return FileError("open", path, errno);
    std::string contents;
    char buffer[1 << 16];
    for (;;) {
      const ssize_t n = ::read(fd, buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const absl::Status error = FileError("read", path, errno);
        ::close(fd);
        return error;
      }
      if (n == 0) break;
      contents.append(buffer, static_cast<size_t>(n));
    }
    ::close(fd);
    return contents;
  }

  absl::StatusOr<std::vector<std::string>> GetChildren(const std::string& dir) override {
    std::vector<std::string> names;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      names.push_back(it->path().filename().string());
    }
    if (ec) return FileError("list", dir, ec.value());
    return names;
  }

  bool IsDirectory(const std::string& path) override {
    std::error_code ec;
    return fs::is_directory(path, ec);
  }

  absl::Status CreateDirs(const std::string& path) override {
    std::error_code ec;
    fs::create_directories(path, ec);
    if (ec) return FileError("create directory", path, ec.value());
    return absl::OkStatus();
  }

  absl::Status RenameFile(const std::string& from, const std::string& to) override {
    if (std::rename(from.c_str(), to.c_str()) != 0) {
      return FileError(absl::StrCat("rename ", from, " to"), to, errno);
    }
    return absl::OkStatus();
  }

  absl::Status RemoveAll(const std::string& path) override {
    std::error_code ec;
    fs::remove_all(path, ec);
    if (ec) return FileError("remove", path, ec.value());
    return absl::OkStatus();
  }

  absl::Status SyncDir(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return FileError("open directory", path, errno);
    const int rc = ::fsync(fd);
    const int error = errno;
    ::close(fd);
    if (rc != 0) return FileError("fsync directory", path, error);
    return absl::OkStatus();
  }
};

}  // namespace

absl::Status FileError(absl::string_view operation, absl::string_view path, int error_number) {
  absl::StatusCode code = absl::StatusCode::kUnavailable;
  switch (error_number) {
    case ENOENT:
      code = absl::StatusCode::kNotFound;
      break;
    case ENOSPC:
    case EDQUOT:
      code = absl::StatusCode::kResourceExhausted;
      break;
    case EACCES:
    case EPERM:
    case EROFS:
      code = absl::StatusCode::kPermissionDenied;
      break;
    default:  // the file system failed (EIO, ...): it may work another time
      break;
  }
  return absl::Status(
      code, absl::StrCat("cannot ", operation, " ", path, ": ", std::strerror(error_number)));
}

Env* Env::Default() {
  static Env* const env = new PosixEnv;
  return env;
}

}  // namespace r2sp
