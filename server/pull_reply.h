// The reply to a pull a server answers (now or once it was parked): the current weights (fp32,
// or the binary16 frame PartitionState encodes once per version), weights predicted a few
// pushes ahead (r2sp delay compensation, at the partition's scheduled learning rate), or
// binary16 differences to the worker's copy (FP16_DELTA, through the partition's PullShadows),
// encoded by common/wire/pull_frames.h.
#ifndef R2SP_SERVER_PULL_REPLY_H_
#define R2SP_SERVER_PULL_REPLY_H_

#include "common/handler.h"
#include "common/wire/pull_frames.h"
#include "server/lr_schedule.h"
#include "server/partition_table.h"
#include "server/sgd.h"

namespace r2sp {

// Thread-safety: Build is const, but it changes `held` (its frames and shadows): the caller
// serialises calls for a partition.
class PullReplier {
 public:
  // `sgd` and `schedule` as the server's (predictions use the rate of the partition's next
  // step); with `per_sample_updates`, the predicted pushes carry the pull's fraction between
  // them, else each is a whole step (ServerOptions).
  PullReplier(const SgdOptions& sgd, const LrSchedule& schedule, bool per_sample_updates);

  // The reply to `pull` of `held`, parked for `waited` seconds (0: answered at once).
  // `num_workers` sizes the partition's shadows when its first FP16_DELTA pull makes them.
  // REQUIRES: pull was decoded by wire::DecodePull; held.state is initialised.
  Message Build(HeldPartition& held, const wire::PullRequest& pull, double waited,
                int num_workers) const;
  // The prediction a pull asking for `updates` more pushes carrying `fraction` between them
  // gets from `held` once it has applied `steps` steps: with the server's SGD, or the script's
  // where it is that (held.script_sgd; other script optimizers predict nothing: Build answers
  // their predicted pulls with the current weights).
  Prediction PredictionFor(const HeldPartition& held, double steps, float fraction,
                           int updates) const;

 private:
  const SgdOptions sgd_;
  const LrSchedule schedule_;
  const bool per_sample_updates_;
};

}  // namespace r2sp

#endif  // R2SP_SERVER_PULL_REPLY_H_
