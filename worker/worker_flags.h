// The worker's flags (defined in worker_flags.cc, for the worker binary and the Python client)
// and their reading into WorkerOptions.
#ifndef R2SP_WORKER_WORKER_FLAGS_H_
#define R2SP_WORKER_WORKER_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gflags/gflags.h"
#include "worker/worker_options.h"

// What worker/main.cc reads besides WorkerOptions (--print_codec, --eval_only).
DECLARE_string(print_codec);
DECLARE_bool(eval_only);
DECLARE_string(init);
DECLARE_string(data);
DECLARE_string(data_dir);
DECLARE_string(device);
DECLARE_int32(threads);
DECLARE_int32(gpu);

namespace r2sp {

// The flags as WorkerOptions, each into the part it configures, validated (InvalidArgument
// naming the flag).
absl::StatusOr<WorkerOptions> WorkerOptionsFromFlags();
// The same, not yet validated: for callers that set more of the options before they
// Validate (the Python client).
absl::StatusOr<WorkerOptions> ParseWorkerFlags();

// Sets worker flags from `args` ("--name=value"; "--name" or "--noname" for a boolean), as the
// command line would: InvalidArgument naming the first that is not a worker flag or whose value
// does not parse (the flags before it stay set). For callers without a command line (the Python
// client); a gflags::FlagSaver around the call and WorkerOptionsFromFlags restores them.
absl::Status SetWorkerFlags(const std::vector<std::string>& args);

}  // namespace r2sp

#endif  // R2SP_WORKER_WORKER_FLAGS_H_
