// Files that survive a crash: written and fsynced, directories fsynced after a rename, so a
// file renamed into place is there, whole, after a power cut. Errors are Unavailable, naming the
// path and errno's text.
#ifndef R2SP_COMMON_DURABLE_FILE_H_
#define R2SP_COMMON_DURABLE_FILE_H_

#include <string>

#include "absl/status/status.h"

namespace r2sp {

// Writes `contents` to `path` (created or truncated) and fsyncs it.
absl::Status WriteAndSync(const std::string& path, const std::string& contents);

// Fsyncs directory `path` (after creating, renaming or removing entries in it).
absl::Status SyncDirectory(const std::string& path);

}  // namespace r2sp

#endif  // R2SP_COMMON_DURABLE_FILE_H_
