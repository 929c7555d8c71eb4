// The plans of a job's epochs (proto EpochPlan) with --absorb_orphaned_shards: which data
// shards have a live worker in each epoch, the others' samples being dealt out among those
// (common/epoch_samples.h). A plan is fixed when the first worker asks for its epoch, from
// the workers alive then, and every later asker gets the same one, so bsp workers agree on the
// epoch's steps and no sample is trained twice in it. Pure: no I/O, no clock, no locking.
#ifndef R2SP_SCHEDULER_EPOCH_PLANS_H_
#define R2SP_SCHEDULER_EPOCH_PLANS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/messages.pb.h"

namespace r2sp {

class EpochPlanBook {
 public:
  // Plans beyond this many epochs are refused (a worker asking for ever more).
  static constexpr int kMaxEpochs = 1 << 20;

  explicit EpochPlanBook(int world);

  // Plans that an earlier attempt of this job saved (--epoch_plans), checked against `world`
  // (the job's initial worker count); the error says what is wrong with them.
  static absl::StatusOr<proto::EpochPlans> Parse(const std::string& bytes, int world);
  // Takes checked plans (Parse) of an earlier attempt.
  void Restore(const proto::EpochPlans& saved);

  // The plan of `epoch` (at most one past the last planned), fixed now from `live` (the shards
  // that have a live worker; any order) if nobody asked for it before; `*fixed` tells whether
  // the plans changed (the caller saves them). `starting`: proto EpochPlanRequest.starting.
  absl::StatusOr<proto::EpochPlan> Plan(int epoch, bool starting, std::vector<int> live,
                                        bool* fixed);

  const proto::EpochPlans& plans() const { return plans_; }

 private:
  proto::EpochPlans plans_;
  int restored_ = 0;  // plans_.plans [0, restored_) came from an earlier attempt
  // A worker asked for the epoch it starts in: restored plans after it are gone (only the
  // first such request prunes; all of a resumed job's workers start in the same epoch).
  bool started_ = false;
};

}  // namespace r2sp

#endif  // R2SP_SCHEDULER_EPOCH_PLANS_H_
