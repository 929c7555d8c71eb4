// The release version of the binaries: what `scheduler --version`, `server --version` and
// `worker --version` print, and what tools/package names its bundles by.
#ifndef R2SP_COMMON_VERSION_H_
#define R2SP_COMMON_VERSION_H_

namespace r2sp {

// "0.7.0 (cpu)" or "0.7.0 (cuda)": the VERSION file and the build variant (--config=cuda).
const char* R2spVersion();

}  // namespace r2sp

#endif  // R2SP_COMMON_VERSION_H_
