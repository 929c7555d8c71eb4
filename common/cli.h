// Helpers the binaries' main() functions share: start-up (flags, logging), flag checks that
// stop the process with a clear message, and parsing of enum-valued flags.
#ifndef R2SP_COMMON_CLI_H_
#define R2SP_COMMON_CLI_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/messages.pb.h"

namespace r2sp {

// Parses flags (gflags) and sets up glog to log to stderr.
void InitProcess(int* argc, char*** argv, const char* usage);

// Prints "NAME: error: MESSAGE" to stderr and exits with status 2 (bad usage) or 1.
[[noreturn]] void ExitWithError(const absl::Status& status);
// Exits with InvalidArgument(message) unless `ok`.
void CheckFlag(bool ok, const std::string& message);

absl::StatusOr<proto::SyncMode> ParseSyncMode(const std::string& name);
std::string SyncModeName(proto::SyncMode mode);
// "fp32" or "fp16" (any case) for the codec flag named `flag`.
absl::StatusOr<proto::Codec> ParseCodec(const std::string& flag, const std::string& name);
std::string CodecName(proto::Codec codec);

// Writes `contents` to `path` atomically (temporary file + rename).
absl::Status WriteFileAtomically(const std::string& path, const std::string& contents);

}  // namespace r2sp

#endif  // R2SP_COMMON_CLI_H_
