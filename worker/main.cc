// The `worker` binary: turns flags into WorkerOptions and runs the worker's life in the job
// (worker_node.h): register, initialise the servers (rank 0), train through the parameter
// servers — a real model on a real data set, or the synthetic workload for transport tests
// and benchmarks — and report to the scheduler. Or, with --eval_only, evaluate a model file.
#include <cstdio>
#include <string>

#include "absl/strings/match.h"
#include "common/cli.h"
#include "common/node_flags.h"
#include "gflags/gflags.h"
#include "models/backend.h"
#include "worker/eval_only.h"
#include "worker/worker_node.h"

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
DEFINE_string(grad, "random", "synthetic gradients: random or known (exactly checkable)");
DEFINE_int32(compute_ms, 0, "synthetic compute time per iteration, milliseconds");
DEFINE_string(init, "random", "initial parameters: random (from --seed), zero, or "
              "checkpoint:PATH (a model file, or a directory of them: the newest good one; "
              "worker 0 starts the job from its parameters)");
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
              "chunks that hold them; 0 = none; docs/RESULTS.md §4)");
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
            "while the next partitions are still being pushed (not with --overlap)");
DEFINE_uint64(bucket_bytes, 4 << 20, "--overlap: push complete partitions once this many fp32 "
              "bytes of them are waiting (0: each partition at once)");
DEFINE_string(dump_params, "", "after training, write the final parameters (raw fp32) here");
DEFINE_int32(eval_every, 0, "real models: also evaluate the test set every this many steps "
             "(0: after each epoch only)");
DEFINE_int32(log_every, 0, "print progress every this many steps (0: 10 synthetic, 50 real)");
DEFINE_int32(request_timeout_s, 120, "give up on a push or pull after this time");

namespace {

void CheckFlags() {
  using r2sp::CheckFlag;
  CheckFlag(FLAGS_model == "synthetic" || FLAGS_model == "mlp" || FLAGS_model == "cnn" ||
                FLAGS_model == "resnet20",
            "--model must be mlp, cnn, resnet20 or synthetic");
  CheckFlag(FLAGS_batch_size >= 1 && FLAGS_batch_size <= 65536, "--batch_size must be in [1, 65536]");
  CheckFlag(FLAGS_epochs >= 1, "--epochs must be >= 1");
  CheckFlag(FLAGS_max_steps >= 0, "--max_steps must be >= 0");
  CheckFlag(FLAGS_threads >= 0, "--threads must be >= 0");
  CheckFlag(FLAGS_device == "cpu" || FLAGS_device == "cuda", "--device must be cpu or cuda");
  CheckFlag(FLAGS_device == "cpu" || r2sp::models::CudaAvailableInBuild(),
            "--device=cuda: this worker was built without CUDA (bazel build --config=cuda)");
  CheckFlag(FLAGS_gpu >= 0, "--gpu must be >= 0");
  CheckFlag(FLAGS_compute_slowdown >= 1.0 && FLAGS_compute_slowdown <= 100,
            "--compute_slowdown must be in [1, 100]");
  CheckFlag(FLAGS_emulate_ms_per_sample >= 0 && FLAGS_emulate_ms_per_sample <= 1000,
            "--emulate_ms_per_sample must be in [0, 1000]");
  CheckFlag(FLAGS_model_mb > 0 && FLAGS_model_mb <= 16384, "--model_mb must be in (0, 16384]");
  CheckFlag(FLAGS_layers >= 1 && FLAGS_layers <= 10000, "--layers must be in [1, 10000]");
  CheckFlag(FLAGS_iterations >= 0, "--iterations must be >= 0");
  CheckFlag(FLAGS_grad == "random" || FLAGS_grad == "known", "--grad must be random or known");
  CheckFlag(FLAGS_init == "random" || FLAGS_init == "zero" ||
                (absl::StartsWith(FLAGS_init, "checkpoint:") && FLAGS_init.size() > 11),
            "--init must be random, zero or checkpoint:PATH");
  CheckFlag(!FLAGS_eval_only || absl::StartsWith(FLAGS_init, "checkpoint:"),
            "--eval_only needs --init=checkpoint:PATH (the model file to evaluate)");
  CheckFlag(!absl::StartsWith(FLAGS_init, "checkpoint:") || FLAGS_model != "synthetic" ||
                FLAGS_eval_only,
            "--init=checkpoint: is for real models (--model=mlp, cnn or resnet20)");
  CheckFlag(FLAGS_keep_models >= 1, "--keep_models must be >= 1");
  CheckFlag(FLAGS_compute_ms >= 0, "--compute_ms must be >= 0");
  CheckFlag(FLAGS_log_every >= 0, "--log_every must be >= 0");
  CheckFlag(FLAGS_eval_every >= 0, "--eval_every must be >= 0");
  CheckFlag(FLAGS_request_timeout_s >= 1, "--request_timeout_s must be >= 1");
  CheckFlag(FLAGS_momentum_correction >= 0 && FLAGS_momentum_correction < 1,
            "--momentum_correction must be in [0, 1)");
  CheckFlag(FLAGS_density_warmup_epochs >= 0, "--density_warmup_epochs must be >= 0");
  CheckFlag(!(FLAGS_early_pulls && FLAGS_overlap),
            "--early_pulls and --overlap do not go together (backward still reads the "
            "parameters while --overlap pushes)");
  if (FLAGS_model == "synthetic") {
    CheckFlag(static_cast<size_t>(FLAGS_model_mb * 1024 * 1024 / 4) >= 65u * FLAGS_layers,
              "--model_mb is too small for --layers (each layer has a 64-float bias)");
  }
}

r2sp::WorkerOptions OptionsFromFlags() {
  r2sp::WorkerOptions o;
  o.connection = r2sp::ConnectionFromFlags(r2sp::proto::WORKER);
  o.model = FLAGS_model;
  o.data = FLAGS_data;
  o.data_dir = FLAGS_data_dir;
  o.batch_size = FLAGS_batch_size;
  o.epochs = FLAGS_epochs;
  o.max_steps = FLAGS_max_steps;
  o.device = FLAGS_device;
  o.gpu = FLAGS_gpu;
  o.threads = FLAGS_threads;
  o.augment = FLAGS_augment;
  o.lookahead = FLAGS_lookahead;
  o.compute_slowdown = FLAGS_compute_slowdown;
  o.emulate_ms_per_sample = FLAGS_emulate_ms_per_sample;
  o.metrics_path = FLAGS_metrics;
  o.timeline_path = FLAGS_timeline;
  o.model_mb = FLAGS_model_mb;
  o.layers = FLAGS_layers;
  o.iterations = FLAGS_iterations;
  o.known_gradients = FLAGS_grad == "known";
  o.compute_ms = FLAGS_compute_ms;
  o.random_init = FLAGS_init == "random";
  if (absl::StartsWith(FLAGS_init, "checkpoint:")) o.init_model_path = FLAGS_init.substr(11);
  o.model_dir = FLAGS_model_dir;
  o.keep_models = FLAGS_keep_models;
  o.seed = FLAGS_seed;
  o.dump_params_path = FLAGS_dump_params;
  o.push_codec =
      r2sp::ValueOrExit(r2sp::codec::ParseCodecSpec("push_codec", FLAGS_push_codec));
  r2sp::CheckFlag(o.push_codec.codec != r2sp::proto::FP16_DELTA,
                  "--push_codec: fp16_delta is for pulls (--pull_codec)");
  o.encode_on_device = FLAGS_encode_on_device;
  o.error_feedback = FLAGS_error_feedback;
  o.momentum_correction = static_cast<float>(FLAGS_momentum_correction);
  o.dense_below = FLAGS_dense_below;
  o.density_warmup_epochs = FLAGS_density_warmup_epochs;
  o.overlap = FLAGS_overlap;
  o.overlap_pulls = FLAGS_overlap_pulls;
  o.bucket_bytes = FLAGS_bucket_bytes;
  o.early_pulls = FLAGS_early_pulls;
  const absl::StatusOr<r2sp::codec::CodecSpec> pull =
      r2sp::codec::ParseCodecSpec("pull_codec", FLAGS_pull_codec);
  r2sp::CheckFlag(pull.ok() && !pull->sparse(),
                  "--pull_codec must be fp32, fp16 or fp16_delta; got '" + FLAGS_pull_codec + "'");
  o.pull_codec = pull->codec;
  o.log_every = FLAGS_log_every;
  o.eval_every = FLAGS_eval_every;
  o.request_timeout = absl::Seconds(FLAGS_request_timeout_s);
  return o;
}

// --eval_only: the model file's accuracy now, beside the one training reported for it.
void EvaluateOnly() {
  r2sp::EvalOnlyOptions o;
  o.model_path = FLAGS_init.substr(11);
  o.data = FLAGS_data;
  o.data_dir = FLAGS_data_dir;
  o.backend.device = FLAGS_device;
  o.backend.threads = FLAGS_threads;
  o.backend.gpu = FLAGS_gpu;
  const r2sp::EvalOnlyResult r = r2sp::ValueOrExit(r2sp::EvaluateModelFile(o));
  for (const std::string& why : r.skipped) std::printf("worker: passed over %s\n", why.c_str());
  std::printf("worker: %s (%s, step %lld): test accuracy %.4f (loss %.4f)", r.path.c_str(),
              r.model.c_str(), static_cast<long long>(r.step), r.accuracy, r.loss);
  if (r.reported_accuracy >= 0) std::printf("; training reported %.4f", r.reported_accuracy);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  r2sp::InitProcess(&argc, &argv, "R2SP worker");
  CheckFlags();
  if (FLAGS_eval_only) {
    EvaluateOnly();
    return 0;
  }
  r2sp::WorkerNode node(OptionsFromFlags());
  const absl::Status status = node.Run();
  if (!status.ok()) r2sp::ExitWithError(status);
  return 0;
}
