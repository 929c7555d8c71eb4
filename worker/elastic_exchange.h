// Elastic averaging on the worker (easgd, eawild; docs/MODES.md). The worker keeps its own
// parameters x and runs the optimizer itself: after every gradient, the local SGD-with-momentum
// step (server/sgd.h, the code the servers run in the other modes), or, for the Python client,
// the script's own optimizer before it hands the step over (local_step false). Every `period`
// steps it exchanges with the centre c that the servers hold:
//   pull c (easgd: once every live worker's previous round is in the centre),
//   d = alpha * (x - c);  x <- x - d;  push w * d (through the push codec; the servers add it),
// w = 1, or with hetero batching W b_i / B: a worker's pull on the centre counts its samples.
// With a sparse push codec (topk, csc) the worker moves by the part of d it sent, s: the rest
// stays in x - c and comes back in the next period's d (its encoders' error feedback is taken
// back after every push, so nothing is sent twice).
// Exchange k is the round whose push carries clock k; it ends global step (k + 1) * period - 1,
// so workers that run the same steps (every epoch plan gives them the same) meet in the same
// rounds, and a job resumed at step s (a multiple of the period) goes on at round s / period.
#ifndef R2SP_WORKER_ELASTIC_EXCHANGE_H_
#define R2SP_WORKER_ELASTIC_EXCHANGE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/messages.pb.h"
#include "server/sgd.h"
#include "worker/host_gradient.h"
#include "worker/ps_client.h"
#include "worker/run_log.h"

namespace r2sp {

struct ElasticOptions {
  // The local step (worker --lr, --momentum, --weight_decay): PyTorch's SGD on the batch's mean
  // gradient. REQUIRES: learning_rate > 0, momentum in [0, 1), weight_decay >= 0.
  SgdOptions sgd;
  int period = 1;      // tau, from the address book. REQUIRES: >= 1
  float alpha = 0.5f;  // from the address book. REQUIRES: in (0, 1]
  // Step takes the local step. False: the caller took it already (the Python client's torch
  // optimizer), and Step only exchanges; `sgd` and the gradient are then unused.
  bool local_step = true;
};

// Starts the pull of the centre into `out` (the model's size) for a worker that has pushed
// `rounds` rounds: in easgd it waits on the servers until rounds [0, rounds) are added, in
// eawild it returns the centre as it is. ElasticExchange's pulls, and the Python client's
// pulls of the centre for evaluation (script_trainer.cc). REQUIRES: `out` outlives the ticket.
Ticket StartCentrePull(PsClient* ps, proto::SyncMode sync, int64_t rounds, proto::Codec codec,
                       float* out);
// StartCentrePull in fp32, waited for in slices of 100 ms: Cancelled as soon as `interrupted`
// (may be empty) says so, and the pull's error with "pulling the centre". Any thread.
absl::Status PullCentre(PsClient* ps, proto::SyncMode sync, int64_t rounds, float* out,
                        const std::function<bool()>& interrupted);

// What one step did, for the iteration's metrics and the timeline.
struct ElasticStepTimes {
  bool exchanged = false;  // this step ended a period
  absl::Time pull_started, pull_done, push_done;
  double parked_seconds = 0;  // easgd: how long the centre's pull waited for the round
};

// Thread-compatible: the training thread calls Step and PullCentre. `ps` is borrowed and
// outlives this.
class ElasticExchange {
 public:
  ElasticExchange(proto::SyncMode sync, const ElasticOptions& options, PsClient* ps,
                  proto::Codec pull_codec);

  // Global step `clock`'s local step on `params` (the model's size) with `grads` (fp32; unused
  // without options.local_step), then, if it ends a period, the exchange (the push carrying
  // `push_scale`, b_i / B). The worker moves by d, the centre by `weight` * d: 1, or with hetero
  // batching W b_i / B (the worker's batch over the mean batch; docs/MODES.md).
  absl::StatusOr<ElasticStepTimes> Step(int64_t clock, HostGradient grads, float* params,
                                        float push_scale, float weight = 1.0f);

  // The centre as of this worker's last exchange (easgd: with that round applied; eawild: now),
  // pulled in fp32 into a buffer of this object's; valid until the next call. For evaluations.
  absl::StatusOr<const float*> PullCentre();

  // Rounds this worker has pushed (the first round it would push next).
  int64_t rounds() const { return rounds_; }

 private:
  // Pulls the centre for round `round` (easgd: waits until rounds [0, round) are applied).
  absl::Status PullCentreFor(int64_t round, proto::Codec codec, double* parked);

  const proto::SyncMode sync_;
  const ElasticOptions options_;
  PsClient* const ps_;
  const proto::Codec pull_codec_;
  // unsent_: what a sparse push codec did not send of the last difference (empty for dense
  // push codecs).
  std::vector<float> momentum_, centre_, difference_, unsent_;
  int64_t rounds_ = -1;  // -1: not known before the first step
};

}  // namespace r2sp

#endif  // R2SP_WORKER_ELASTIC_EXCHANGE_H_
