// See curve_keys.h.
#include "common/auth/curve_keys.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "zmq.h"

namespace r2sp {
namespace {

constexpr proto::Role kRoles[] = {proto::SCHEDULER, proto::SERVER, proto::WORKER};
constexpr size_t kZ85KeyChars = 40;

std::string KeyPath(const std::string& dir, proto::Role role, bool secret) {
  return absl::StrCat(dir, "/", KeyRoleName(role), secret ? ".key" : ".pub");
}

absl::StatusOr<std::string> ReadKeyFile(const std::string& path, bool secret) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat("cannot read key file ", path, ": ", strerror(errno)));
  }
  struct stat st;
  char buf[128];
  ssize_t n = -1;
  if (fstat(fd, &st) == 0) n = read(fd, buf, sizeof(buf));
  const int saved = errno;
  close(fd);
  if (n < 0) {
    return absl::InternalError(absl::StrCat("cannot read key file ", path, ": ", strerror(saved)));
  }
  if (secret && (st.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        "secret key file ", path, " has mode ", absl::StrFormat("%04o", st.st_mode & 07777),
        ": group and others must have no access (chmod 600 ", path, ")"));
  }
  std::string key(absl::StripAsciiWhitespace(absl::string_view(buf, n)));
  if (!DecodeZ85Key(key).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("key file ", path, " does not hold a 40-character Z85 CURVE key"));
  }
  return key;
}

absl::Status WriteKeyFile(const std::string& path, const std::string& key, mode_t mode,
                          bool force) {
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (force ? O_TRUNC : O_EXCL);
  const int fd = open(path.c_str(), flags, mode);
  if (fd < 0) {
    return errno == EEXIST
               ? absl::AlreadyExistsError(absl::StrCat(path, " exists; pass --force to replace "
                                                       "the job's keys"))
               : absl::InternalError(absl::StrCat("cannot write ", path, ": ", strerror(errno)));
  }
  const std::string text = key + "\n";
  const bool ok = fchmod(fd, mode) == 0 &&
                  write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                  fsync(fd) == 0;
  const int saved = errno;
  close(fd);
  if (!ok) return absl::InternalError(absl::StrCat("cannot write ", path, ": ", strerror(saved)));
  return absl::OkStatus();
}

}  // namespace

const char* KeyRoleName(proto::Role role) {
  switch (role) {
    case proto::SCHEDULER:
      return "scheduler";
    case proto::SERVER:
      return "server";
    case proto::WORKER:
      return "worker";
    default:
      return "none";
  }
}

proto::Role RoleFromKeyName(const std::string& name) {
  for (proto::Role role : kRoles) {
    if (name == KeyRoleName(role)) return role;
  }
  return proto::ROLE_UNSPECIFIED;
}

absl::StatusOr<std::string> DecodeZ85Key(const std::string& z85) {
  if (z85.size() != kZ85KeyChars) return absl::InvalidArgumentError("not a Z85 key");
  std::string binary(32, '\0');
  if (zmq_z85_decode(reinterpret_cast<uint8_t*>(binary.data()), z85.c_str()) == nullptr) {
    return absl::InvalidArgumentError("not a Z85 key");
  }
  return binary;
}

absl::StatusOr<JobKeys> LoadJobKeys(const std::string& dir, proto::Role role) {
  if (RoleFromKeyName(KeyRoleName(role)) == proto::ROLE_UNSPECIFIED) {
    return absl::InvalidArgumentError("keys are per role: scheduler, server or worker");
  }
  JobKeys keys;
  keys.role = role;
  for (proto::Role r : kRoles) {
    R2SP_ASSIGN_OR_RETURN(keys.public_keys[r], ReadKeyFile(KeyPath(dir, r, false), false));
  }
  keys.public_key = keys.public_keys[role];
  R2SP_ASSIGN_OR_RETURN(keys.secret_key, ReadKeyFile(KeyPath(dir, role, true), true));
  char derived[kZ85KeyChars + 1];
  if (zmq_curve_public(derived, keys.secret_key.c_str()) != 0 || keys.public_key != derived) {
    return absl::InvalidArgumentError(absl::StrCat(KeyPath(dir, role, true), " and ",
                                                   KeyPath(dir, role, false),
                                                   " are not one key pair"));
  }
  return keys;
}

absl::StatusOr<absl::flat_hash_map<int, JobKeys>> GenerateJobKeys() {
  absl::flat_hash_map<int, std::string> publics, secrets;
  for (proto::Role r : kRoles) {
    char public_key[kZ85KeyChars + 1], secret_key[kZ85KeyChars + 1];
    if (zmq_curve_keypair(public_key, secret_key) != 0) {
      return absl::UnimplementedError(absl::StrCat("zmq_curve_keypair: ", zmq_strerror(zmq_errno())));
    }
    publics[r] = public_key;
    secrets[r] = secret_key;
  }
  absl::flat_hash_map<int, JobKeys> all;
  for (proto::Role r : kRoles) {
    JobKeys& keys = all[r];
    keys.role = r;
    keys.public_key = publics[r];
    keys.secret_key = secrets[r];
    keys.public_keys = publics;
  }
  return all;
}

absl::Status WriteJobKeys(const std::string& dir, bool force) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", strerror(errno)));
  }
  if (!force) {
    for (proto::Role r : kRoles) {
      for (bool secret : {false, true}) {
        if (access(KeyPath(dir, r, secret).c_str(), F_OK) == 0) {
          return absl::AlreadyExistsError(absl::StrCat(
              KeyPath(dir, r, secret), " exists; pass --force to replace the job's keys"));
        }
      }
    }
  }
  for (proto::Role r : kRoles) {
    char public_key[kZ85KeyChars + 1], secret_key[kZ85KeyChars + 1];
    if (zmq_curve_keypair(public_key, secret_key) != 0) {
      return absl::UnimplementedError(
          absl::StrCat("zmq_curve_keypair: ", zmq_strerror(zmq_errno()),
                       " (libzmq built without CURVE?)"));
    }
    R2SP_RETURN_IF_ERROR(WriteKeyFile(KeyPath(dir, r, true), secret_key, 0600, force));
    R2SP_RETURN_IF_ERROR(WriteKeyFile(KeyPath(dir, r, false), public_key, 0644, force));
  }
  return absl::OkStatus();
}

}  // namespace r2sp
