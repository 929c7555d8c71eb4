// See slot_coordinator.h.
#include "scheduler/slot_coordinator.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "glog/logging.h"

namespace r2sp {

SlotCoordinator::SlotCoordinator(const SlotCoordinatorOptions& options, bool r2sp)
    : options_(options),
      r2sp_(r2sp),
      planner_(options.headroom, /*smoothing=*/0.2, options.order, options.gap_holds) {
  CHECK_GE(options.width, 0);
  if (options.width > 0) planner_.set_width(options.width);
  if (options.width == 0 && r2sp_) {
    width_tuner_ = std::make_unique<SlotWidthTuner>(options.width_tuning, /*max_width=*/1);
  }
}

void SlotCoordinator::RingChanged() {
  if (width_tuner_ == nullptr) return;
  width_tuner_->SetMaxWidth(static_cast<int>(planner_.ring().size()));
  planner_.set_width(width_tuner_->width());
}

void SlotCoordinator::SetMembers(int num_workers) {
  if (options_.hetero_batching) {
    tuner_ = std::make_unique<BatchTuner>(options_.batching, num_workers);
  }
  std::vector<int> ranks;
  for (int r = 0; r < num_workers; ++r) ranks.push_back(r);
  planner_.SetMembers(ranks);
  RingChanged();
}

void SlotCoordinator::WorkerJoined(int rank) {
  planner_.Add(rank);
  RingChanged();
  if (tuner_ != nullptr) tuner_->AddWorker();
}

void SlotCoordinator::WorkerLeft(int rank, absl::Time now) {
  planner_.Remove(rank);
  RingChanged();
  stats_.Released(rank);
  waiting_.erase(rank);
  if (tuner_ != nullptr) tuner_->Remove(rank);
  GrantDue(now);
}

void SlotCoordinator::RequestSlot(int rank, const proto::IterationReport& report,
                                  Responder responder, absl::Time now) {
  if (!r2sp_) {
    responder.ReplyStatus(
        absl::FailedPreconditionError("SLOT needs a worker and a job with --sync=r2sp"));
    return;
  }
  absl::Status status = planner_.Request(rank, report.compute_seconds());
  if (!status.ok()) {
    responder.ReplyStatus(status);
    return;
  }
  if (tuner_ != nullptr) {
    tuner_->Report(rank, report.samples(), report.compute_seconds(), report.comm_seconds(),
                   report.iterations_left());
  }
  waiting_.insert_or_assign(rank, std::move(responder));
  GrantDue(now);
}

absl::Status SlotCoordinator::Release(int rank, bool leaving, absl::Time now) {
  absl::StatusOr<int> granted_width = planner_.Release(rank, now);
  if (granted_width.ok()) stats_.Released(rank);
  if (granted_width.ok() && width_tuner_ != nullptr) {
    const int chosen = width_tuner_->chosen();
    width_tuner_->Observe(*granted_width, now);
    planner_.set_width(width_tuner_->width());
    if (width_tuner_->chosen() != chosen) {
      LOG(INFO) << "r2sp slot width " << chosen << " -> " << width_tuner_->chosen() << " ("
                << width_tuner_->throughput() << " releases/s)";
    }
  }
  if (granted_width.ok() && leaving) {
    planner_.Remove(rank, /*finished=*/true);  // done training: the ring closes over it
    RingChanged();
    LOG(INFO) << "worker " << rank << " left the slot ring (" << planner_.ring().size()
              << " left in it)";
  }
  GrantDue(now);
  return granted_width.status();
}

absl::StatusOr<proto::BatchAssignment> SlotCoordinator::Report(
    int rank, const proto::IterationReport& report) {
  if (tuner_ == nullptr) {
    return absl::FailedPreconditionError(
        "REPORT needs a worker and a job with --hetero_batching");
  }
  tuner_->Report(rank, report.samples(), report.compute_seconds(), report.comm_seconds(),
                 report.iterations_left());
  return Assignment(rank);
}

proto::BatchAssignment SlotCoordinator::Assignment(int worker) const {
  proto::BatchAssignment a;
  a.set_batch_size(tuner_->batch(worker));
  a.set_throughput(tuner_->throughput(worker));
  return a;
}

void SlotCoordinator::NoteCandidate(absl::Time now) {
  const std::optional<int> candidate = planner_.Candidate();
  if (candidate == candidate_) return;
  candidate_ = candidate;
  candidate_since_ = now;
}

void SlotCoordinator::GrantDue(absl::Time now) {
  while (true) {
    NoteCandidate(now);
    const absl::Time previous = planner_.last_grant();
    const absl::Duration gap = planner_.gap();
    const std::optional<int> w = planner_.Poll(now);
    if (!w.has_value()) break;
    // Due once it was the candidate and the gap had passed.
    stats_.Granted(*w, std::max(candidate_since_, previous + gap), previous, gap,
                   planner_.width(), now);
    auto it = waiting_.find(*w);
    if (it == waiting_.end()) continue;  // cannot happen: Poll grants requesters only
    Message reply;
    proto::SlotGrant* grant = reply.header.mutable_slot_grant();
    grant->set_gap_seconds(absl::ToDoubleSeconds(planner_.gap()));
    grant->set_grant_index(planner_.grants() - 1);
    grant->set_granted_unix_us(absl::ToUnixMicros(now));
    if (tuner_ != nullptr) *grant->mutable_batch() = Assignment(*w);
    it->second.Reply(std::move(reply));
    waiting_.erase(it);
  }
}

}  // namespace r2sp
