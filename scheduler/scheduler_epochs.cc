// SchedulerCore's epoch plans (scheduler_core.h, scheduler/epoch_plans.h): with
// --absorb_orphaned_shards, each worker asks for the plan of every epoch it starts; the first
// to ask fixes it from the shards of the workers alive then (joining ones included), and the
// shards of dead workers are dealt out among those for that epoch. A dealt-out shard is no
// longer free for a joiner (its samples would be trained twice in the epoch); a shard orphaned
// later in the epoch is, until the next plan deals it out.
#include <vector>

#include "absl/strings/str_join.h"
#include "glog/logging.h"
#include "scheduler/scheduler_core.h"

namespace r2sp {

void SchedulerCore::HandleEpochPlan(const Message& request, const Node& node,
                                    Responder& responder) {
  if (node.role != proto::WORKER || !options_.absorb_orphaned_shards) {
    responder.ReplyStatus(absl::FailedPreconditionError(
        "EPOCH_PLAN needs a worker and a scheduler with --absorb_orphaned_shards"));
    return;
  }
  std::vector<int> live;
  for (const Node& w : workers_) {
    if (w.state != NodeState::kDead && w.data_shard >= 0) live.push_back(w.data_shard);
  }
  const proto::EpochPlanRequest& ask = request.header.epoch_plan_request();
  const int planned = epoch_plans_.plans().plans_size();
  bool fixed = false;
  absl::StatusOr<proto::EpochPlan> plan =
      epoch_plans_.Plan(ask.epoch(), ask.starting(), live, &fixed);
  if (!plan.ok()) {
    responder.ReplyStatus(plan.status());
    return;
  }
  if (epoch_plans_.plans().plans_size() > planned) {  // a new epoch was planned
    if (plan->live_shards_size() < options_.num_workers) {
      LOG(INFO) << "epoch " << ask.epoch() + 1 << ": the dead workers' data shards are dealt "
                << "out among the live shards " << absl::StrJoin(plan->live_shards(), ", ");
    }
    orphan_shards_.clear();  // dealt out: the plan counts every shard with a live worker
  }
  if (fixed && options_.save_epoch_plans) options_.save_epoch_plans(epoch_plans_.plans());
  Message reply;
  *reply.header.mutable_epoch_plan() = *std::move(plan);
  responder.Reply(std::move(reply));
}

}  // namespace r2sp
