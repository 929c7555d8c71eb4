// See worker_options.h.
#include "worker/worker_options.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/codec/codec_spec.h"
#include "common/option_checker.h"
#include "common/sync_modes.h"

namespace r2sp {
namespace {

// What only one kind of model uses.
void CheckModel(const WorkerOptions& o, OptionChecker& c) {
  if (o.external_model) {
    c.Check(!o.model.empty() && !o.is_synthetic(), "--model", "model",
            "a name for the caller's model (not empty, not synthetic)", o.model);
  } else {
    c.Check(o.model == "synthetic" || o.model == "mlp" || o.model == "cnn" ||
                o.model == "resnet20",
            "--model", "model", "mlp, cnn, resnet20 or synthetic", o.model);
  }
  c.Check(o.batch_size >= 1 && o.batch_size <= 65536, "--batch_size", "batch_size",
          "in [1, 65536]", o.batch_size);
  c.Require(o.init_model_path.empty() || !o.is_synthetic(), "--init=checkpoint:",
            "init_model_path", "is for real models (--model=mlp, cnn or resnet20)");
  c.Check(o.model_mb > 0 && o.model_mb <= 16384, "--model_mb", "model_mb", "in (0, 16384]",
          o.model_mb);
  c.Check(o.layers >= 1 && o.layers <= 10000, "--layers", "layers", "in [1, 10000]", o.layers);
  if (o.is_synthetic()) {
    c.Check(static_cast<size_t>(o.model_mb * 1024 * 1024 / 4) >= 65u * o.layers, "--model_mb",
            "model_mb", "large enough for --layers (each layer has a 64-float bias)",
            o.model_mb);
  }
  c.Check(o.iterations >= 0, "--iterations", "iterations", ">= 0", o.iterations);
  c.Check(o.workers_per_process >= 1, "--workers_per_process", "workers_per_process", ">= 1",
          o.workers_per_process);
  c.Require(o.workers_per_process <= 1 || (o.is_synthetic() && !o.external_model),
            "--workers_per_process", "workers_per_process",
            "above 1 is for the synthetic model only (--model=synthetic): real models load "
            "their data and network once per process");
  c.Check(o.log_every >= 0, "--log_every", "log_every", ">= 0", o.log_every);
  c.Check(o.synthetic.compute_ms >= 0, "--compute_ms", "synthetic.compute_ms", ">= 0",
          o.synthetic.compute_ms);
}

void CheckCompute(const WorkerOptions& o, OptionChecker& c) {
  c.Check(o.loop.epochs >= 1, "--epochs", "loop.epochs", ">= 1", o.loop.epochs);
  c.Check(o.loop.max_steps >= 0, "--max_steps", "loop.max_steps", ">= 0", o.loop.max_steps);
  c.Check(o.loop.eval_every >= 0, "--eval_every", "loop.eval_every", ">= 0", o.loop.eval_every);
  c.Check(o.loop.compute_slowdown >= 1 && o.loop.compute_slowdown <= 100, "--compute_slowdown",
          "loop.compute_slowdown", "in [1, 100]", o.loop.compute_slowdown);
  c.Check(o.loop.emulate_ms_per_sample >= 0 && o.loop.emulate_ms_per_sample <= 1000,
          "--emulate_ms_per_sample", "loop.emulate_ms_per_sample", "in [0, 1000]",
          o.loop.emulate_ms_per_sample);
  c.Check(o.backend.device == "cpu" || o.backend.device == "cuda", "--device", "backend.device",
          "cpu or cuda", o.backend.device);
  c.Require(o.backend.device != "cuda" || models::CudaAvailableInBuild(), "--device=cuda",
            "backend.device", "needs a worker built with CUDA (bazel build --config=cuda)");
  c.Check(o.backend.threads >= 0, "--threads", "backend.threads", ">= 0", o.backend.threads);
  c.Check(o.backend.gpu >= 0, "--gpu", "backend.gpu", ">= 0", o.backend.gpu);
  c.Check(o.workload.keep_models >= 1, "--keep_models", "workload.keep_models", ">= 1",
          o.workload.keep_models);
}

void CheckExchange(const WorkerOptions& o, OptionChecker& c) {
  c.Check(o.ps.request_timeout >= absl::Seconds(1), "--request_timeout_s", "ps.request_timeout",
          ">= 1s", o.ps.request_timeout);
  c.Check(o.ps.push_codec.codec != proto::FP16_DELTA, "--push_codec", "ps.push_codec",
          "fp32, fp16, topk or csc (fp16_delta is for pulls)",
          codec::CodecSpecName(o.ps.push_codec));
  c.Check(o.ps.momentum_correction >= 0 && o.ps.momentum_correction < 1,
          "--momentum_correction", "ps.momentum_correction", "in [0, 1)",
          o.ps.momentum_correction);
  const proto::Codec pull = o.exchange.pull_codec;
  c.Check(pull == proto::FP32 || pull == proto::FP16 || pull == proto::FP16_DELTA,
          "--pull_codec", "exchange.pull_codec", "fp32, fp16 or fp16_delta",
          codec::CodecSpecName({pull}));
  c.Check(o.exchange.density_warmup_epochs >= 0, "--density_warmup_epochs",
          "exchange.density_warmup_epochs", ">= 0", o.exchange.density_warmup_epochs);
  const SgdOptions& sgd = o.exchange.elastic.sgd;
  c.Check(sgd.learning_rate > 0, "--lr", "exchange.elastic.sgd.learning_rate", "> 0",
          sgd.learning_rate);
  c.Check(sgd.momentum >= 0 && sgd.momentum < 1, "--momentum", "exchange.elastic.sgd.momentum",
          "in [0, 1)", sgd.momentum);
  c.Check(sgd.weight_decay >= 0, "--weight_decay", "exchange.elastic.sgd.weight_decay", ">= 0",
          sgd.weight_decay);
  c.Check(o.exchange.early_pulls_in_flight >= 0, "--early_pulls_in_flight",
          "exchange.early_pulls_in_flight", ">= 0", o.exchange.early_pulls_in_flight);
  c.Require(!(o.exchange.early_pulls && o.exchange.overlap && !o.exchange.params_staged),
            "--early_pulls", "exchange.early_pulls",
            "does not go with --overlap (backward still reads the parameters while --overlap "
            "pushes) unless the compute reads a copy of them (the Python client's CUDA models)");
}

}  // namespace

PsClientOptions WorkerPsDefaults() {
  PsClientOptions options;
  options.dense_below = 16384;
  return options;
}

ExchangerOptions WorkerExchangeDefaults() {
  ExchangerOptions options;
  options.lookahead = true;
  options.overlap_pulls = true;
  return options;
}

models::BatcherOptions WorkerBatcherDefaults() {
  models::BatcherOptions options;
  options.augment = true;
  return options;
}

ModelWorkloadOptions WorkerWorkloadDefaults() {
  ModelWorkloadOptions options;
  options.fp16_gradients = true;
  return options;
}

absl::Status WorkerOptions::Validate() const {
  OptionChecker c("WorkerOptions");
  c.Merge(connection.Validate());
  CheckModel(*this, c);
  CheckCompute(*this, c);
  CheckExchange(*this, c);
  return c.status();
}

ExchangerOptions JobExchangerOptions(const WorkerOptions& options, const proto::AddressBook& book) {
  ExchangerOptions mode = options.exchange;
  mode.sync = book.sync();
  mode.staleness = book.staleness();
  mode.slot_includes_pull = book.r2sp_slot_includes_pull();
  mode.workers = book.workers_size();
  // Real models (TrainModel, TrainExternal): lookahead, and the batch sizes (the synthetic
  // workload's pushes are not weighted).
  mode.lookahead = false;
  mode.hetero_batching = false;
  mode.global_batch = 0;
  mode.initial_batch = 0;
  if (Elastic(book.sync())) {
    mode.elastic.period = book.elastic_period();
    mode.elastic.alpha = static_cast<float>(book.elastic_alpha());
    // The Python client's script takes the local step with its own optimizer.
    mode.elastic.local_step = !options.external_model;
  }
  const codec::CodecSpec& push = options.ps.push_codec;
  mode.push_density = push.sparse() ? push.ratio : 1.0;
  if (!push.sparse()) mode.density_warmup_epochs = 0.0;
  return mode;
}

absl::Status CheckJobMode(const WorkerOptions& options, const proto::AddressBook& book) {
  if (!Elastic(book.sync())) return absl::OkStatus();
  const std::string mode = book.sync() == proto::EASGD ? "easgd" : "eawild";
  auto refuse = [&mode](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " does not go with --sync=", mode, " yet (docs/MODES.md)"));
  };
  if (options.ps.push_codec.sparse() && !options.ps.error_feedback) {
    return refuse("--error_feedback=false with a sparse --push_codec (the worker keeps what a "
                  "push did not send through it)");
  }
  if (options.ps.momentum_correction > 0) return refuse("--momentum_correction");
  if (options.exchange.pull_codec == proto::FP16_DELTA) return refuse("--pull_codec=fp16_delta");
  if (options.exchange.overlap) return refuse("--overlap");
  if (options.exchange.early_pulls) return refuse("--early_pulls");
  if (book.elastic_period() < 1 || !(book.elastic_alpha() > 0 && book.elastic_alpha() <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the address book's elastic period ", book.elastic_period(), " or alpha ",
        book.elastic_alpha(), " is out of range (a scheduler older than this worker?)"));
  }
  return absl::OkStatus();
}

}  // namespace r2sp
