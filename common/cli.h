// Helpers the binaries' main() functions share: start-up (flags, logging), ending the process
// with a clear message for an error (only main decides exit codes; libraries return Status).
#ifndef R2SP_COMMON_CLI_H_
#define R2SP_COMMON_CLI_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/messages.pb.h"

namespace r2sp {

// Parses flags (gflags; --version prints R2spVersion() and exits) and sets up glog to log to
// stderr; calls KeepFreedMemoryForReuse.
void InitProcess(int* argc, char*** argv, const char* usage);

// Tells glibc's malloc to keep freed buffers of up to 64 MiB in the heap instead of returning
// them to the kernel. Every message frame (received partitions, encoded pushes, fp16 pull
// replies) is a fresh buffer of about a partition's size; with glibc's defaults, freeing a
// burst of them trimmed the heap and the next burst faulted every page in again, and fp16
// push+pull of large models ran several times slower than fp32 instead of faster
// (docs/BENCHMARKS.md#wire-codecs-against-memcpy).
void KeepFreedMemoryForReuse();

// Prints "NAME: error: MESSAGE" to stderr and exits with status 2 (bad usage) or 1.
[[noreturn]] void ExitWithError(const absl::Status& status);
// The value, or exits printing the error (status 2 for InvalidArgument, as ExitWithError).
template <typename T>
T ValueOrExit(absl::StatusOr<T> value) {
  if (!value.ok()) ExitWithError(value.status());
  return *std::move(value);
}

}  // namespace r2sp

#endif  // R2SP_COMMON_CLI_H_
