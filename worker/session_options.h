// SessionOptions: what a worker's life in the job and its training steps need, whoever
// computes the gradients (the worker binary's own models, or the Python client's): how it
// reaches the job, the parameter-server client's, the exchanger's and the training run's
// options, and the files it writes. No model or data set: the worker binary's WorkerOptions
// (worker_options.h) adds those; the Python client fills these from a map of option values
// (session_option_map.h). Validate() says what is wrong, naming the option and the field.
#ifndef R2SP_WORKER_SESSION_OPTIONS_H_
#define R2SP_WORKER_SESSION_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/node_connection.h"
#include "common/option_checker.h"
#include "proto/messages.pb.h"
#include "worker/exchanger.h"
#include "worker/loop_options.h"
#include "worker/ps_client.h"

namespace r2sp {

// The worker binary's defaults where they differ from the parts' own (its flags' defaults).
PsClientOptions WorkerPsDefaults();         // dense_below 16384
ExchangerOptions WorkerExchangeDefaults();  // lookahead, overlap_pulls

// Each field's flag (the worker binary's) or option (session_option_map.h) has the field's
// name unless it says otherwise; the defaults are the worker binary's.
struct SessionOptions {
  NodeConnectionOptions connection;
  // The model's name in the job's reports; with the worker binary's own models, the model it
  // builds (WorkerOptions checks the name).
  std::string model = "synthetic";
  // The model is the caller's (the Python client's): `model` only names it. REQUIRES (then):
  // model not empty, not "synthetic".
  bool external_model = false;

  // The rank this worker asks the scheduler for at the job's start (proto
  // RegisterRequest.requested_rank), as torchrun's RANK gives it; -1: the scheduler chooses. A
  // worker joining a running job takes the next rank whatever it asks. REQUIRES: >= -1 (the
  // scheduler refuses one outside [0, the job's workers)).
  int rank = -1;
  int batch_size = 64;  // samples per step without hetero batching. REQUIRES: in [1, 65536]
  // Initial parameters, shuffling, dropout (seed + rank) and the synthetic workload's random
  // gradients.
  uint64_t seed = 1;
  // Files, none when empty: the final parameters after training, raw fp32 (--dump_params);
  // per-iteration metrics, JSON lines (--metrics); a Chrome-trace timeline (--timeline). See
  // run_log.h.
  std::string dump_params_path;
  std::string metrics_path;
  std::string timeline_path;
  int log_every = 0;  // progress lines; 0: the trainer's (10 synthetic, 50 real). REQUIRES: >= 0

  // The parts' options. The session sets the fields the job decides (ranks, world sizes, the
  // mode, batch sizes, seeds) from the scheduler's address book and the fields above; the
  // others come from here:
  // epochs (>= 1), max_steps (>= 0), eval_every (>= 0), compute_slowdown (in [1, 100]),
  // emulate_ms_per_sample (in [0, 1000]).
  LoopOptions loop;
  // request_timeout (--request_timeout_s, >= 1 s), push_codec (not fp16_delta),
  // error_feedback, momentum_correction (in [0, 1)), dense_below.
  PsClientOptions ps = WorkerPsDefaults();
  // lookahead (real models), pull_codec (fp32, fp16 or fp16_delta), overlap, overlap_pulls,
  // bucket_bytes, early_pulls (with overlap only if params_staged), early_pulls_in_flight
  // (>= 0), density_warmup_epochs (>= 0; sparse codecs), elastic.sgd (--lr > 0, --momentum in
  // [0, 1), --weight_decay >= 0).
  ExchangerOptions exchange = WorkerExchangeDefaults();

  // OK, or InvalidArgument naming the first field (and its flag) that breaks a REQUIRES, the
  // connection's included: "--FLAG (SessionOptions.FIELD) must be ...".
  absl::Status Validate() const;

 protected:
  // Validate()'s checks through `checker`, so that a struct built on this one validates these
  // fields under its own name.
  void CheckSessionFields(OptionChecker& checker) const;
};

// The exchanger's options for a job: the address book's mode (sync, staleness, slot width,
// workers, the push codec's density) over `options.exchange`; the real models' fields
// (lookahead, hetero batching, batch sizes) cleared for the worker to set.
ExchangerOptions JobExchangerOptions(const SessionOptions& options,
                                     const proto::AddressBook& book);

// OK, or InvalidArgument saying which of the worker's options the job's mode cannot run with
// (easgd, eawild: sparse push codecs without error feedback, momentum correction, fp16_delta
// pulls, --overlap, --early_pulls). Every worker checks it once registration told it the mode.
absl::Status CheckJobMode(const SessionOptions& options, const proto::AddressBook& book);

}  // namespace r2sp

#endif  // R2SP_WORKER_SESSION_OPTIONS_H_
