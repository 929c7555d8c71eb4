// See cli.h.
#include "common/cli.h"

#include <malloc.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/version.h"
#include "gflags/gflags.h"
#include "glog/logging.h"

namespace r2sp {
namespace {
std::string program_name = "r2sp";
}  // namespace

void InitProcess(int* argc, char*** argv, const char* usage) {
  if (*argc > 0) {
    program_name = (*argv)[0];
    const size_t slash = program_name.rfind('/');
    if (slash != std::string::npos) program_name = program_name.substr(slash + 1);
  }
  KeepFreedMemoryForReuse();
  FLAGS_logtostderr = true;
  gflags::SetUsageMessage(usage);
  gflags::SetVersionString(R2spVersion());  // --version prints it and exits
  gflags::ParseCommandLineFlags(argc, argv, true);
  google::InitGoogleLogging((*argv)[0]);
}

void KeepFreedMemoryForReuse() {
  mallopt(M_MMAP_THRESHOLD, 64 << 20);   // larger blocks still get their own mapping
  mallopt(M_TRIM_THRESHOLD, 512 << 20);  // give memory back only above this much free at the top
}

void ExitWithError(const absl::Status& status) {
  std::fprintf(stderr, "%s: error: %s\n", program_name.c_str(),
               std::string(status.message()).c_str());
  std::fflush(stderr);
  std::exit(absl::IsInvalidArgument(status) ? 2 : 1);
}

}  // namespace r2sp
