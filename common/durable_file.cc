// See durable_file.h.
#include "common/durable_file.h"

#include <algorithm>
#include <memory>

#include "common/status_macros.h"

namespace r2sp {

absl::Status WriteAndSync(Env* env, const std::string& path, const std::string& contents) {
  R2SP_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, env->NewWritableFile(path));
  R2SP_RETURN_IF_ERROR(file->Append(contents));
  R2SP_RETURN_IF_ERROR(file->Sync());
  return file->Close();
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& contents, Env* env) {
  const std::string tmp = path + ".tmp";
  absl::Status written = WriteAndSync(env, tmp, contents);
  if (written.ok()) written = env->RenameFile(tmp, path);
  if (!written.ok()) {
    env->RemoveAll(tmp).IgnoreError();  // the error that matters is `written`
    return written;
  }
  // The rename itself survives a crash once the directory is on disk.
  return env->SyncDir(DirectoryOf(path));
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, std::max<size_t>(slash, 1));
}

}  // namespace r2sp
