// See session_options.h.
#include "worker/session_options.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/codec/codec_spec.h"
#include "common/sync_modes.h"

namespace r2sp {
namespace {

void CheckLoop(const LoopOptions& loop, OptionChecker& c) {
  c.Check(loop.epochs >= 1, "--epochs", "loop.epochs", ">= 1", loop.epochs);
  c.Check(loop.max_steps >= 0, "--max_steps", "loop.max_steps", ">= 0", loop.max_steps);
  c.Check(loop.eval_every >= 0, "--eval_every", "loop.eval_every", ">= 0", loop.eval_every);
  c.Check(loop.compute_slowdown >= 1 && loop.compute_slowdown <= 100, "--compute_slowdown",
          "loop.compute_slowdown", "in [1, 100]", loop.compute_slowdown);
  c.Check(loop.emulate_ms_per_sample >= 0 && loop.emulate_ms_per_sample <= 1000,
          "--emulate_ms_per_sample", "loop.emulate_ms_per_sample", "in [0, 1000]",
          loop.emulate_ms_per_sample);
}

void CheckExchange(const PsClientOptions& ps, const ExchangerOptions& exchange,
                   OptionChecker& c) {
  c.Check(ps.request_timeout >= absl::Seconds(1), "--request_timeout_s", "ps.request_timeout",
          ">= 1s", ps.request_timeout);
  c.Check(ps.push_codec.codec != proto::FP16_DELTA, "--push_codec", "ps.push_codec",
          "fp32, fp16, topk or csc (fp16_delta is for pulls)",
          codec::CodecSpecName(ps.push_codec));
  c.Check(ps.momentum_correction >= 0 && ps.momentum_correction < 1, "--momentum_correction",
          "ps.momentum_correction", "in [0, 1)", ps.momentum_correction);
  const proto::Codec pull = exchange.pull_codec;
  c.Check(pull == proto::FP32 || pull == proto::FP16 || pull == proto::FP16_DELTA,
          "--pull_codec", "exchange.pull_codec", "fp32, fp16 or fp16_delta",
          codec::CodecSpecName({pull}));
  c.Check(exchange.density_warmup_epochs >= 0, "--density_warmup_epochs",
          "exchange.density_warmup_epochs", ">= 0", exchange.density_warmup_epochs);
  const SgdOptions& sgd = exchange.elastic.sgd;
  c.Check(sgd.learning_rate > 0, "--lr", "exchange.elastic.sgd.learning_rate", "> 0",
          sgd.learning_rate);
  c.Check(sgd.momentum >= 0 && sgd.momentum < 1, "--momentum", "exchange.elastic.sgd.momentum",
          "in [0, 1)", sgd.momentum);
  c.Check(sgd.weight_decay >= 0, "--weight_decay", "exchange.elastic.sgd.weight_decay", ">= 0",
          sgd.weight_decay);
  c.Check(exchange.early_pulls_in_flight >= 0, "--early_pulls_in_flight",
          "exchange.early_pulls_in_flight", ">= 0", exchange.early_pulls_in_flight);
  c.Require(!(exchange.early_pulls && exchange.overlap && !exchange.params_staged),
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

void SessionOptions::CheckSessionFields(OptionChecker& c) const {
  c.Merge(connection.Validate());
  if (external_model) {
    c.Check(!model.empty() && model != "synthetic", "--model", "model",
            "a name for the caller's model (not empty, not synthetic)", model);
  }
  c.Check(rank >= -1, "--rank", "rank", ">= -1 (-1: the scheduler chooses)", rank);
  c.Check(batch_size >= 1 && batch_size <= 65536, "--batch_size", "batch_size", "in [1, 65536]",
          batch_size);
  c.Check(log_every >= 0, "--log_every", "log_every", ">= 0", log_every);
  CheckLoop(loop, c);
  CheckExchange(ps, exchange, c);
}

absl::Status SessionOptions::Validate() const {
  OptionChecker c("SessionOptions");
  CheckSessionFields(c);
  return c.status();
}

ExchangerOptions JobExchangerOptions(const SessionOptions& options,
                                     const proto::AddressBook& book) {
  ExchangerOptions mode = options.exchange;
  mode.sync = book.sync();
  mode.staleness = book.staleness();
  mode.slot_includes_pull = book.r2sp_slot_includes_pull();
  mode.workers = book.workers_size();
  // Real models (the worker's and the Python client's): lookahead, and the batch sizes (the
  // synthetic workload's pushes are not weighted).
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

absl::Status CheckJobMode(const SessionOptions& options, const proto::AddressBook& book) {
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
