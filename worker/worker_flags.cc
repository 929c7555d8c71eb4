// The worker's flags, defined once for the worker binary (worker/main.cc) and the Python
// client (worker/python/), and read into WorkerOptions. The node flags' block is the same text
// as server/main.cc's (tests/common/node_flags_test.cc checks it).
#include "worker/worker_flags.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/codec/codec_spec.h"
#include "common/node_flags.h"
#include "common/status_macros.h"
#include "gflags/gflags.h"

// The flags every server and worker takes to reach its job, read by common/node_flags.h (the
// same text in server/main.cc and worker/main.cc: gflags are defined only in the mains).
// Start of the node flags.
DEFINE_string(scheduler, "tcp://127.0.0.1:9000", "the scheduler's endpoint");
DEFINE_string(bind, "tcp://0.0.0.0:*", "ZeroMQ endpoint to listen on (* = any free port)");
DEFINE_string(advertise_host, "", "host name or address the other nodes reach us at");
DEFINE_int32(heartbeat_ms, 1000, "heartbeat period; the scheduler refuses a node unless two "
             "periods fit in its --heartbeat_timeout_ms");
DEFINE_int32(register_wait_s, 60, "give up if the scheduler does not answer this node's "
             "registration in this time");
DEFINE_int32(register_timeout_s, 60, "DEPRECATED alias of --register_wait_s (the scheduler's "
             "--register_timeout_s is the whole job's registration)");
DEFINE_int32(io_threads, 0, "ZeroMQ I/O threads, which seal and open CURVE messages (0: 1, or "
             "2 with --auth=curve)");
DEFINE_int32(connections_per_peer, 0, "connections to each peer, pushes and pulls spread over "
             "them by partition so that CURVE's work on one peer's traffic uses several I/O "
             "threads (0: 1, or --io_threads with --auth=curve)");
DEFINE_double(scheduler_timeout_s, 9, "stop (status 3) once the scheduler has answered no "
              "heartbeat for this long (servers write a checkpoint first)");
DEFINE_string(auth, "none", "none, or curve: CurveZMQ encryption and authentication with the "
              "job's keys (tools/keygen; docs/SECURITY.md)");
DEFINE_string(keys_dir, "", "with --auth=curve: the directory of the job's keys (default: "
              "$R2SP_KEYS_DIR)");
// End of the node flags (tests/common/node_flags_test.cc checks both copies match).

DEFINE_string(model, "synthetic", "mlp, cnn, resnet20, or synthetic (no data; see --model_mb)");
DEFINE_string(data, "fashion-mnist", "fashion-mnist, mnist or cifar10");
DEFINE_string(data_dir, "", "directory of the data set's files (default for fashion-mnist: "
              "Debian's /usr/share/datasets/fashion-mnist)");
DEFINE_int32(batch_size, 64, "samples per step on this worker");
DEFINE_int32(epochs, 1, "passes over this worker's shard");
DEFINE_int64(max_steps, 0, "stop after this many steps (0: run all epochs)");
DEFINE_string(device, "cpu", "cpu (oneDNN) or cuda (cuDNN/cuBLAS; needs a build with "
              "--config=cuda)");
DEFINE_int32(gpu, 0, "CUDA device index for --device=cuda");
DEFINE_int32(threads, 0, "CPU backend threads (0: oneDNN's default, all cores)");
DEFINE_bool(augment, true, "cifar10: random crop and flip");
DEFINE_bool(lookahead, true, "r2sp: compute each gradient at the parameters the servers predict "
            "for when it will be applied (delay compensation; docs/MODES.md)");
DEFINE_double(compute_slowdown, 1.0, "EMULATION of a slower machine: stretch each compute phase "
              "to this many times its length by sleeping after it (1 = off)");
DEFINE_double(emulate_ms_per_sample, 0, "EMULATION of an accelerator: each compute phase lasts "
              "at least this many milliseconds per sample (sleeping after the real compute)");
DEFINE_string(metrics, "", "write per-iteration metrics here (JSON lines)");
DEFINE_string(timeline, "", "write a Chrome-trace timeline of compute/wait/push/pull here");
DEFINE_double(model_mb, 16, "synthetic model size in MB of fp32 parameters");
DEFINE_int32(layers, 8, "synthetic model: number of layers (weight + bias tensors each)");
DEFINE_int32(iterations, 100, "synthetic: iterations");
DEFINE_int32(workers_per_process, 1, "synthetic: run this many workers as threads of this "
             "process, each with its own connections, registration, rank and heartbeats (their "
             "--metrics, --timeline and --dump_params files get _tK before the extension); the "
             "process exits 3 if any of them is lost to the job");
DEFINE_string(grad, "random", "synthetic gradients: random or known (exactly checkable)");
DEFINE_int32(compute_ms, 0, "synthetic compute time per iteration, milliseconds");
DEFINE_string(init, "random", "initial parameters: random (from --seed), zero, or "
              "checkpoint:PATH (a model file, or a directory of them: the newest good one; "
              "worker 0 starts the job from its parameters)");
DEFINE_string(print_codec, "", "print this --push_codec value's canonical form and exit (status "
              "2, saying why, if the worker would refuse it): tools ask the worker rather than "
              "keep a copy of the grammar");
DEFINE_bool(eval_only, false, "evaluate --init=checkpoint:PATH on --data's test set and exit "
            "(no job: no scheduler or servers)");
DEFINE_string(model_dir, "", "real models, the evaluating worker: after each evaluation, write "
              "the model as evaluated (parameters, batch-norm statistics, accuracy) here");
DEFINE_int32(keep_models, 3, "--model_dir: keep the newest this many model files");
DEFINE_uint64(seed, 1, "seed for initial parameters, shuffling, dropout and random gradients");
DEFINE_string(push_codec, "fp32", "how gradients travel to the servers: fp32, fp16, "
              "topk:RATIO[,fp16][,exact] (the largest RATIO of the values) or "
              "csc:RATIO[,fp16][,chunk=N] (the RATIO of N-value chunks with the largest norms; "
              "N = 32768 by default)");
DEFINE_bool(encode_on_device, true, "--push_codec=fp16 on a GPU (--device=cuda): encode the "
            "gradients to fp16 on the GPU before copying them out, halving the bytes over the "
            "bus (false: copy fp32 and encode on the host)");
DEFINE_bool(error_feedback, true, "topk/csc: add what a push did not send to the next gradient");
DEFINE_double(momentum_correction, 0, "topk/csc: DGC momentum correction with this momentum "
              "(0 = off); run the servers with --momentum=0 then");
DEFINE_uint64(dense_below, 16384, "topk/csc: tensors of fewer values than this (biases, batch "
              "norm, a small classifier) go whole in every push besides the selection (csc: the "
              "chunks that hold them; 0 = none; docs/RESULTS.md#wire-codecs)");
DEFINE_double(density_warmup_epochs, 0, "topk/csc: start dense and lower the density "
              "geometrically to the codec's ratio over this many epochs (0 = off)");
DEFINE_string(pull_codec, "fp32", "how parameters travel back: fp32, fp16 (the weights "
              "rounded) or fp16_delta (binary16 differences to the worker's copy, the rounding "
              "error carried to the next pull; servers keep a copy per worker); the first and "
              "the final pull are always fp32");
DEFINE_bool(overlap, false, "push each partition while backward still runs, as soon as its "
            "gradient is complete, in buckets of --bucket_bytes (r2sp: asks for its slot before "
            "backward ends, from its predicted end, and pushes once granted)");
DEFINE_bool(overlap_pulls, true, "--overlap: also start the next forward while the pull "
            "runs, each layer waiting only for its own parameters (the CUDA backend uploads each "
            "layer's once its pull has landed)");
DEFINE_bool(early_pulls, false, "pull each partition as soon as its push is acknowledged, "
            "while the next partitions are still being pushed (with --overlap only in the "
            "Python client's CUDA models, whose backward reads its own copy of the parameters)");
DEFINE_int32(early_pulls_in_flight, 0, "--early_pulls with --overlap: at most this many pulls "
             "in flight until every push of the step is acknowledged, the first partitions "
             "first, then the rest (0: each partition's pull as its push is acknowledged)");
DEFINE_uint64(bucket_bytes, 4 << 20, "--overlap: push complete partitions once this many fp32 "
              "bytes of them are waiting (0: each partition at once)");
DEFINE_double(lr, 0.01, "easgd, eawild: the worker's local SGD learning rate (give it the "
              "servers' --lr; the other modes' optimizer runs on the servers)");
DEFINE_double(momentum, 0.9, "easgd, eawild: the local SGD's momentum (0 disables it)");
DEFINE_double(weight_decay, 0, "easgd, eawild: the local SGD's weight decay");
DEFINE_string(dump_params, "", "after training, write the final parameters (raw fp32) here");
DEFINE_int32(eval_every, 0, "real models: also evaluate the test set every this many steps "
             "(0: after each epoch only)");
DEFINE_int32(log_every, 0, "print progress every this many steps (0: 10 synthetic, 50 real)");
DEFINE_int32(request_timeout_s, 120, "give up on a push or pull after this time");

namespace {

// --init: random, zero, or checkpoint:PATH (its PATH into `path`).
absl::Status ParseInit(const std::string& init, bool* random, std::string* path) {
  *random = init == "random";
  if (init == "random" || init == "zero") return absl::OkStatus();
  if (absl::StartsWith(init, "checkpoint:") && init.size() > 11) {
    *path = init.substr(11);
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      "--init must be random, zero or checkpoint:PATH, got '" + init + "'");
}

// --grad: random or known.
absl::StatusOr<bool> ParseKnownGradients(const std::string& grad) {
  if (grad == "random" || grad == "known") return grad == "known";
  return absl::InvalidArgumentError("--grad must be random or known, got '" + grad + "'");
}

// --pull_codec: fp32, fp16 or fp16_delta.
absl::StatusOr<r2sp::proto::Codec> ParsePullCodec(const std::string& text) {
  const absl::StatusOr<r2sp::codec::CodecSpec> pull =
      r2sp::codec::ParseCodecSpec("pull_codec", text);
  if (pull.ok() && !pull->sparse()) return pull->codec;
  return absl::InvalidArgumentError("--pull_codec must be fp32, fp16 or fp16_delta; got '" +
                                    text + "'");
}

}  // namespace

namespace r2sp {

absl::StatusOr<WorkerOptions> WorkerOptionsFromFlags() {
  R2SP_ASSIGN_OR_RETURN(WorkerOptions o, ParseWorkerFlags());
  R2SP_RETURN_IF_ERROR(o.Validate());  // before anything starts
  return o;
}

absl::StatusOr<WorkerOptions> ParseWorkerFlags() {
  r2sp::WorkerOptions o;
  R2SP_ASSIGN_OR_RETURN(o.connection, r2sp::ConnectionFromFlags(r2sp::proto::WORKER));
  o.model = FLAGS_model;
  o.data = FLAGS_data;
  o.data_dir = FLAGS_data_dir;
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
  R2SP_ASSIGN_OR_RETURN(o.ps.push_codec,
                        r2sp::codec::ParseCodecSpec("push_codec", FLAGS_push_codec));
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


absl::Status SetWorkerFlags(const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (!absl::StartsWith(arg, "--") || arg.size() < 3) {
      return absl::InvalidArgumentError(
          absl::StrCat("worker flags look like --name=value, got '", arg, "'"));
    }
    const size_t eq = arg.find('=');
    std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    gflags::CommandLineFlagInfo info;
    if (eq == std::string::npos) {
      // --name and --noname for booleans.
      const bool negated = absl::StartsWith(name, "no") &&
                           gflags::GetCommandLineFlagInfo(name.substr(2).c_str(), &info) &&
                           info.type == "bool";
      if (negated) name = name.substr(2);
      value = negated ? "false" : "true";
    }
    if (!gflags::GetCommandLineFlagInfo(name.c_str(), &info)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown worker flag --", name));
    }
    if (eq == std::string::npos && info.type != "bool") {
      return absl::InvalidArgumentError(
          absl::StrCat("worker flag --", name, " needs a value (--", name, "=VALUE)"));
    }
    if (gflags::SetCommandLineOption(name.c_str(), value.c_str()).empty()) {
      return absl::InvalidArgumentError(absl::StrCat("bad value for worker flag --", name, ": '",
                                                     value, "' (", info.type, " expected)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace r2sp
