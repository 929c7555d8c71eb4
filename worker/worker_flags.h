// The worker binary's flags (defined in main_flags.cc, which only the binary and the tests of
// its flags link; the node flags in common/node_flags.cc) and their reading into WorkerOptions.
// Libraries take WorkerOptions or SessionOptions, never flags.
#ifndef R2SP_WORKER_WORKER_FLAGS_H_
#define R2SP_WORKER_WORKER_FLAGS_H_

#include "absl/status/statusor.h"
#include "gflags/gflags.h"
#include "worker/worker_options.h"

DECLARE_string(model);
DECLARE_string(data);
DECLARE_string(data_dir);
DECLARE_int32(rank);
DECLARE_int32(batch_size);
DECLARE_int32(epochs);
DECLARE_int64(max_steps);
DECLARE_string(device);
DECLARE_int32(gpu);
DECLARE_int32(threads);
DECLARE_bool(augment);
DECLARE_bool(lookahead);
DECLARE_double(compute_slowdown);
DECLARE_double(emulate_ms_per_sample);
DECLARE_string(metrics);
DECLARE_string(timeline);
DECLARE_double(model_mb);
DECLARE_int32(layers);
DECLARE_int32(iterations);
DECLARE_int32(workers_per_process);
DECLARE_string(grad);
DECLARE_int32(compute_ms);
DECLARE_string(init);
DECLARE_string(print_codec);
DECLARE_bool(eval_only);
DECLARE_string(model_dir);
DECLARE_int32(keep_models);
DECLARE_uint64(seed);
DECLARE_string(push_codec);
DECLARE_bool(encode_on_device);
DECLARE_bool(error_feedback);
DECLARE_double(momentum_correction);
DECLARE_uint64(dense_below);
DECLARE_double(density_warmup_epochs);
DECLARE_string(pull_codec);
DECLARE_bool(overlap);
DECLARE_bool(overlap_pulls);
DECLARE_bool(early_pulls);
DECLARE_int32(early_pulls_in_flight);
DECLARE_uint64(bucket_bytes);
DECLARE_double(lr);
DECLARE_double(momentum);
DECLARE_double(weight_decay);
DECLARE_string(dump_params);
DECLARE_int32(eval_every);
DECLARE_int32(log_every);
DECLARE_int32(request_timeout_s);

namespace r2sp {

// The flags as WorkerOptions, each into the part it configures, validated (InvalidArgument
// naming the flag).
absl::StatusOr<WorkerOptions> WorkerOptionsFromFlags();

}  // namespace r2sp

#endif  // R2SP_WORKER_WORKER_FLAGS_H_
