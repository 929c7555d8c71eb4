// The worker binary's flags (main_flags.cc, common/node_flags.cc) read into WorkerOptions.
#include "worker/worker_flags.h"

#include <string>

#include "absl/strings/match.h"
#include "common/codec/codec_spec.h"
#include "common/node_flags.h"
#include "common/status_macros.h"
#include "gflags/gflags.h"
#include "worker/session_option_map.h"

namespace r2sp {
namespace {

// --init: random, zero, or checkpoint:PATH (its PATH into `path`).
absl::Status ParseInit(const std::string& init, bool* random, std::string* path) {
  *random = init == "random";
  if (init == "random" || init == "zero") return absl::OkStatus();
  if (absl::StartsWith(init, "checkpoint:") && init.size() > 11) {
    *path = init.substr(11);
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError("--init must be random, zero or checkpoint:PATH, got '" + init +
                                    "'");
}

// --grad: random or known.
absl::StatusOr<bool> ParseKnownGradients(const std::string& grad) {
  if (grad == "random" || grad == "known") return grad == "known";
  return absl::InvalidArgumentError("--grad must be random or known, got '" + grad + "'");
}

// The flags as WorkerOptions, not yet validated.
absl::StatusOr<WorkerOptions> ParseWorkerFlags() {
  WorkerOptions o;
  R2SP_ASSIGN_OR_RETURN(o.connection, ConnectionFromFlags(proto::WORKER));
  o.model = FLAGS_model;
  o.data = FLAGS_data;
  o.data_dir = FLAGS_data_dir;
  o.rank = FLAGS_rank;
  o.batch_size = FLAGS_batch_size;
  R2SP_RETURN_IF_ERROR(ParseInit(FLAGS_init, &o.random_init, &o.init_model_path));
  o.model_mb = FLAGS_model_mb;
  o.layers = FLAGS_layers;
  o.iterations = FLAGS_iterations;
  o.workers_per_process = FLAGS_workers_per_process;
  o.seed = FLAGS_seed;
  o.dump_params_path = FLAGS_dump_params;
  o.metrics_path = FLAGS_metrics;
  o.timeline_path = FLAGS_timeline;
  o.log_every = FLAGS_log_every;
  o.loop.epochs = FLAGS_epochs;
  o.loop.max_steps = FLAGS_max_steps;
  o.loop.eval_every = FLAGS_eval_every;
  o.loop.compute_slowdown = FLAGS_compute_slowdown;
  o.loop.emulate_ms_per_sample = FLAGS_emulate_ms_per_sample;
  o.backend.device = FLAGS_device;
  o.backend.threads = FLAGS_threads;
  o.backend.gpu = FLAGS_gpu;
  o.batcher.augment = FLAGS_augment;
  o.ps.request_timeout = absl::Seconds(FLAGS_request_timeout_s);
  R2SP_ASSIGN_OR_RETURN(o.ps.push_codec, codec::ParseCodecSpec("push_codec", FLAGS_push_codec));
  o.ps.error_feedback = FLAGS_error_feedback;
  o.ps.momentum_correction = static_cast<float>(FLAGS_momentum_correction);
  o.ps.dense_below = FLAGS_dense_below;
  o.exchange.lookahead = FLAGS_lookahead;
  R2SP_ASSIGN_OR_RETURN(o.exchange.pull_codec, ParsePullCodec(FLAGS_pull_codec));
  o.exchange.overlap = FLAGS_overlap;
  o.exchange.overlap_pulls = FLAGS_overlap_pulls;
  o.exchange.bucket_bytes = FLAGS_bucket_bytes;
  o.exchange.early_pulls = FLAGS_early_pulls;
  o.exchange.early_pulls_in_flight = FLAGS_early_pulls_in_flight;
  o.exchange.density_warmup_epochs = FLAGS_density_warmup_epochs;
  o.exchange.elastic.sgd = {static_cast<float>(FLAGS_lr), static_cast<float>(FLAGS_momentum),
                            static_cast<float>(FLAGS_weight_decay)};
  o.workload.model_dir = FLAGS_model_dir;
  o.workload.keep_models = FLAGS_keep_models;
  o.workload.fp16_gradients = FLAGS_encode_on_device;
  R2SP_ASSIGN_OR_RETURN(o.synthetic.known_gradients, ParseKnownGradients(FLAGS_grad));
  o.synthetic.compute_ms = FLAGS_compute_ms;
  return o;
}

}  // namespace

absl::StatusOr<WorkerOptions> WorkerOptionsFromFlags() {
  R2SP_ASSIGN_OR_RETURN(WorkerOptions o, ParseWorkerFlags());
  R2SP_RETURN_IF_ERROR(o.Validate());  // before anything starts
  return o;
}

}  // namespace r2sp
