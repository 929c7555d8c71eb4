// CurveZMQ keys of a job: one key pair per role (scheduler, server, worker), kept as Z85 text
// files in one directory (ROLE.pub, ROLE.key). A process loads every role's public key and its
// own role's secret key, refusing a secret key file that group or others may read or write.
#ifndef R2SP_COMMON_AUTH_CURVE_KEYS_H_
#define R2SP_COMMON_AUTH_CURVE_KEYS_H_

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/messages.pb.h"

namespace r2sp {

// What a process needs to speak CURVE: its role's key pair and every role's public key.
// Keys are Z85 text (40 characters). Never log them.
struct JobKeys {
  proto::Role role = proto::ROLE_UNSPECIFIED;
  std::string public_key;
  std::string secret_key;
  absl::flat_hash_map<int, std::string> public_keys;  // by proto::Role, all three roles
};

// "scheduler", "server" or "worker": the key files' base name and the ZAP user id.
const char* KeyRoleName(proto::Role role);
// The role a ZAP user id (KeyRoleName) names; ROLE_UNSPECIFIED for anything else.
proto::Role RoleFromKeyName(const std::string& name);

// Loads `dir`'s three public keys and `role`'s secret key. Errors name the file: missing,
// malformed, or a secret key file with any group/other permission bit.
absl::StatusOr<JobKeys> LoadJobKeys(const std::string& dir, proto::Role role);

// Writes a fresh key pair per role into `dir` (created 0700 if absent): ROLE.pub (0644) and
// ROLE.key (0600). Refuses to replace existing key files unless `force`.
absl::Status WriteJobKeys(const std::string& dir, bool force);

// Fresh keys for every role, in memory, as each role's process would load them (tests and
// benchmarks): index by proto::Role.
absl::StatusOr<absl::flat_hash_map<int, JobKeys>> GenerateJobKeys();

// The 32-byte binary form of a Z85 key, or an error if `z85` is not one.
absl::StatusOr<std::string> DecodeZ85Key(const std::string& z85);

}  // namespace r2sp

#endif  // R2SP_COMMON_AUTH_CURVE_KEYS_H_
