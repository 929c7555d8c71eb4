// ServerOptions: how a parameter server updates its shard (optimizer, learning-rate schedule,
// per-sample updates, apply threads), with Validate(), which the server binary, tests and
// benchmarks go through (ServerNode::Run returns its error).
#ifndef R2SP_SERVER_SERVER_OPTIONS_H_
#define R2SP_SERVER_SERVER_OPTIONS_H_

#include "absl/status/status.h"
#include "proto/messages.pb.h"
#include "server/lr_schedule.h"
#include "server/sgd.h"

namespace r2sp {

// ServerOptions::apply_threads: "auto", resolved by ServerNode once it knows its partitions
// (server/apply_threads.h, AutoApplyThreads).
inline constexpr int kAutoApplyThreads = 0;

struct ServerOptions {
  // sgd.learning_rate is the base rate (--lr). REQUIRES: learning_rate > 0, momentum in
  // [0, 1), weight_decay >= 0.
  SgdOptions sgd;
  // Multiplies the base rate per update. REQUIRES: warmup_updates >= 0, gamma in (0, 1],
  // milestones positive and ascending.
  LrSchedule schedule;
  proto::SyncMode sync = proto::ASP;
  // easgd, eawild: the workers' local steps between elastic exchanges (the address book's
  // elastic_period): an easgd round, or an eawild push of fraction f (b_i / B), counts as
  // period (times f) global-batch steps of training. REQUIRES: >= 1.
  int elastic_period = 1;
  // Asynchronous modes (asp, ssp, r2sp): a push's scale is its fraction b_i / B of a global-batch
  // step, and the update is normalised per sample (StepForFraction), so that every mode runs the
  // same hyperparameters. false: every push is one whole SGD step on its own gradient (classic
  // ASP; the scale is ignored).
  bool per_sample_updates = true;
  // Threads that share a large partition's update and predicted weights (1: the request thread
  // alone). Results are the same bit for bit. kAutoApplyThreads: ServerNode picks the count
  // from the partitions and the cores (a ServerHandler given it unresolved uses 1).
  // REQUIRES: kAutoApplyThreads or in [1, 64].
  int apply_threads = kAutoApplyThreads;

  // OK, or InvalidArgument naming the first field (and its flag) that breaks a REQUIRES.
  absl::Status Validate() const;
};

}  // namespace r2sp

#endif  // R2SP_SERVER_SERVER_OPTIONS_H_
