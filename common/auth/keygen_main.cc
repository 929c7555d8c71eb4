// The `keygen` binary: writes a job's CurveZMQ key pairs, one per role, into a directory
// (tools/keygen wraps it). Prints where they went, never the keys.
#include <cstdio>
#include <string>

#include "common/auth/curve_keys.h"
#include "gflags/gflags.h"

DEFINE_bool(force, false, "replace existing key files");

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "keygen DIR [--force]: writes DIR/{scheduler,server,worker}.{pub,key} (secret keys mode "
      "0600, DIR 0700) for --auth=curve --keys_dir=DIR");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (argc != 2) {
    std::fprintf(stderr, "usage: keygen DIR [--force]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const absl::Status written = r2sp::WriteJobKeys(dir, FLAGS_force);
  if (!written.ok()) {
    std::fprintf(stderr, "keygen: error: %s\n", std::string(written.message()).c_str());
    return 1;
  }
  std::printf("wrote the job's CURVE keys (one pair per role) to %s\n", dir.c_str());
  return 0;
}
