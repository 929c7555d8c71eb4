// See final_sync.h.
#include "worker/final_sync.h"

#include "common/status_macros.h"
#include "common/sync_modes.h"

namespace r2sp {

FinalSync::FinalSync(SchedulerClient* scheduler, PsClient* ps, EvaluatorRole* evaluator,
                     const proto::AddressBook& book)
    : scheduler_(scheduler),
      ps_(ps),
      evaluator_(evaluator),
      sync_(book.sync()),
      elastic_period_(book.elastic_period()) {}

absl::Status FinalSync::PassBarrier() {
  if (passed_.has_value()) return *passed_;
  // Every worker's last push is applied once all have passed this barrier.
  absl::Status status = WithContext(scheduler_->Barrier(proto::WORKERS), "final barrier");
  if (status.ok()) {
    // Asked after the barrier's release, so the scheduler answers after it declared dead every
    // worker the barrier stopped waiting for.
    absl::StatusOr<proto::HeartbeatReply> news = scheduler_->HeartbeatNow();
    if (news.ok()) {
      evaluator_->OnHeartbeat(*news);
    } else {
      status = WithContext(news.status(), "asking the scheduler who is alive");
    }
  }
  passed_ = status;
  return status;
}

absl::Status FinalSync::PullFinal(float* params, int64_t steps) {
  if (params == pulled_into_ && steps == pulled_steps_) return absl::OkStatus();
  PullOptions final_pull;
  if (sync_ == proto::BSP) final_pull.min_version = steps;
  if (sync_ == proto::EASGD && elastic_period_ > 0)
    final_pull.min_version = steps / elastic_period_;
  R2SP_RETURN_IF_ERROR_WITH(ps_->Pull(params, final_pull).Wait(), "final pull");
  pulled_into_ = params;
  pulled_steps_ = steps;
  return absl::OkStatus();
}

absl::Status FinalSync::Settle(float* params, int64_t steps) {
  R2SP_RETURN_IF_ERROR(PassBarrier());
  if (Elastic(sync_)) return absl::OkStatus();
  return PullFinal(params, steps);
}

}  // namespace r2sp
