// See checkpointer.h.
#include "server/checkpointer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "glog/logging.h"

namespace r2sp {

absl::Status ParseCheckpointEvery(const std::string& spec, CheckpointPolicy* policy) {
  policy->every_time = absl::ZeroDuration();
  policy->every_steps = 0;
  if (spec.empty()) return absl::OkStatus();
  absl::string_view number = spec;
  const auto bad = [&spec] {
    return absl::InvalidArgumentError(absl::StrCat(
        "--checkpoint_every=", spec, ": want <N>s (seconds) or <N>steps, e.g. 30s or 500steps"));
  };
  if (absl::ConsumeSuffix(&number, "steps")) {
    int64_t steps;
    if (!absl::SimpleAtoi(number, &steps) || steps < 1) return bad();
    policy->every_steps = steps;
    return absl::OkStatus();
  }
  double seconds;
  if (!absl::ConsumeSuffix(&number, "s") || !absl::SimpleAtod(number, &seconds) ||
      !(seconds > 0 && seconds < 1e9)) {
    return bad();
  }
  policy->every_time = absl::Seconds(seconds);
  return absl::OkStatus();
}

Checkpointer::Checkpointer(const CheckpointPolicy& policy, ServerHandler* handler,
                           CheckpointIdentity identity)
    : policy_(policy),
      handler_(handler),
      identity_(std::move(identity)),
      store_(policy.dir, identity_.server_rank, policy.keep, policy.env),
      last_time_(absl::Now()) {}

Checkpointer::~Checkpointer() { Stop(); }

void Checkpointer::Start() {
  if (policy_.every_time <= absl::ZeroDuration() && policy_.every_steps <= 0) return;
  {
    absl::MutexLock lock(&mu_);
    last_time_ = absl::Now();
    last_steps_ = handler_->Steps();
    if (policy_.every_steps > 0) {
      handler_->SnapshotAtSteps(last_steps_ + policy_.every_steps, policy_.every_steps);
    }
  }
  thread_ = std::thread([this] { Loop(); });
}

void Checkpointer::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

void Checkpointer::Loop() {
  constexpr absl::Duration kPoll = absl::Milliseconds(100);  // how soon Stop() is heeded
  while (!stop_.HasBeenNotified()) {
    absl::StatusOr<std::string> path;
    if (policy_.every_steps > 0) {
      // The handler took it at the due step; written here, off the requests' path.
      std::optional<proto::ShardCheckpoint> shard = handler_->TakeStepSnapshot(kPoll);
      if (!shard.has_value()) continue;
      absl::MutexLock lock(&mu_);
      // Not over a newer one written meanwhile (on demand): the newest must be the latest.
      if (ShardSteps(*shard) < last_steps_) continue;
      path = WriteLocked(*shard, "periodic", absl::Now());
    } else {
      if (stop_.WaitForNotificationWithTimeout(kPoll)) return;
      {
        absl::MutexLock lock(&mu_);
        if (absl::Now() - last_time_ < policy_.every_time) continue;
      }
      path = CheckpointNow("periodic");
    }
    // A failed write is retried at the next period, not every 100 ms.
    if (!path.ok()) LOG(ERROR) << "checkpoint failed: " << path.status();
  }
}

absl::StatusOr<std::string> Checkpointer::CheckpointNow(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (!handler_->Initialized()) {
    return absl::FailedPreconditionError(
        "nothing to checkpoint yet: the initial parameters have not arrived");
  }
  const absl::Time start = absl::Now();
  return WriteLocked(handler_->Snapshot(), reason, start);
}

double Checkpointer::ShardSteps(const proto::ShardCheckpoint& shard) {
  double steps = shard.partitions().empty() ? 0.0 : shard.partitions(0).steps();
  for (const proto::PartitionCheckpoint& p : shard.partitions()) steps = std::min(steps, p.steps());
  return steps;
}

absl::StatusOr<std::string> Checkpointer::WriteLocked(const proto::ShardCheckpoint& shard,
                                                      const std::string& reason,
                                                      absl::Time start) {
  const double steps = ShardSteps(shard);
  last_time_ = start;
  last_steps_ = steps;
  absl::StatusOr<std::string> path =
      store_.Write(shard, identity_, static_cast<int64_t>(steps + 1e-6), reason);
  if (path.ok()) {
    LOG(INFO) << "server " << identity_.server_rank << ": checkpoint (" << reason << ") at step "
              << static_cast<int64_t>(steps + 1e-6) << " written to " << *path << " in "
              << absl::FormatDuration(absl::Now() - start);
  }
  return path;
}

}  // namespace r2sp
