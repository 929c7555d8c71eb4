// Files that survive a crash, written through an Env (common/env.h): written and fsynced, and
// renamed into place with the directory fsynced after the rename, so a file renamed into place
// is there, whole, after a power cut. Errors are the Env's (FileError: the errno's code, a
// message naming the file and the operation).
#ifndef R2SP_COMMON_DURABLE_FILE_H_
#define R2SP_COMMON_DURABLE_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "common/env.h"

namespace r2sp {

// Writes `contents` to `path` (created or truncated), fsyncs and closes it. On an error the
// file may hold part of `contents`.
absl::Status WriteAndSync(Env* env, const std::string& path, const std::string& contents);

// Writes `contents` to `path` atomically and durably: PATH.tmp written and fsynced, renamed
// into place, the directory fsynced. A crash or an error leaves the old file or the new one,
// never a part (on an error PATH.tmp is removed, if it can be).
absl::Status WriteFileAtomically(const std::string& path, const std::string& contents,
                                 Env* env = Env::Default());

// The directory holding `path` ("." for a bare name, "/" for a file at the root).
std::string DirectoryOf(const std::string& path);

}  // namespace r2sp

#endif  // R2SP_COMMON_DURABLE_FILE_H_
