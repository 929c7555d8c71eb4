// ServerHandler's membership part (server_handler.h): workers that leave (from the scheduler's
// heartbeats) and workers that join a running job (MEMBERSHIP). asp and r2sp joiners take part
// at once. bsp and ssp joiners join at a clock boundary, in two steps the scheduler drives
// (proto Membership): prepare, where a bsp server holds its clocks and every server answers the
// first clock a joiner may take part from, then the MEMBERSHIP with the agreed join_clock.
// bsp: clocks before it complete without the joiner, clocks from it on wait for it, and none
// from it on completed before (the hold). ssp: the joiner counts as having pushed every clock
// before it, so the staleness bound does not wait for it.
#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "server/server_handler.h"

namespace r2sp {
namespace {

// Join clocks beyond this are refused (a malformed or hostile MEMBERSHIP).
constexpr int64_t kMaxJoinClock = int64_t{1} << 48;

}  // namespace

absl::Status ServerHandler::HandleMembership(const Message& request, Responder& responder) {
  R2SP_RETURN_IF_ERROR(CheckScheduler(responder, "change membership"));
  const proto::Membership& m = request.header.membership();
  if (m.prepare() && m.cancel()) {
    return absl::InvalidArgumentError("MEMBERSHIP: prepare and cancel exclude each other");
  }
  Message reply;
  if (m.prepare()) {
    R2SP_ASSIGN_OR_RETURN(const int64_t first, PrepareJoin());
    reply.header.set_clock(first);
  } else if (m.cancel()) {
    LOG(INFO) << "server " << rank_ << ": the join was cancelled";
    ReleaseHold();
  } else {
    R2SP_RETURN_IF_ERROR(GrowWorkers(m));
  }
  responder.Reply(std::move(reply));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ServerHandler::PrepareJoin() {
  if (options_.sync == proto::BSP) {
    if (!hold_after_.has_value()) {
      int64_t open = 0;
      for (const auto& [key, held] : partitions_) open = std::max(open, held->aggregator->clock());
      hold_after_ = open;
      LOG(INFO) << "server " << rank_ << ": a worker joins; clocks past " << open
                << " wait for it";
    }
    return *hold_after_ + 1;
  }
  if (options_.sync == proto::SSP) {
    int64_t leading = 0;  // the clock the most advanced live worker pushes next
    for (const auto& [key, held] : partitions_) {
      for (int w = 0; w < num_workers_; ++w) {
        if (live_workers_[w]) leading = std::max(leading, held->pushed[w]);
      }
    }
    return leading;
  }
  return absl::FailedPreconditionError(
      "MEMBERSHIP prepare is for bsp and ssp joins (asp and r2sp workers join at once)");
}

absl::Status ServerHandler::GrowWorkers(const proto::Membership& membership) {
  const int num_workers = membership.num_workers();
  if (num_workers < num_workers_ || num_workers > num_workers_ + 1024) {
    return absl::InvalidArgumentError(absl::StrCat("cannot go from ", num_workers_, " to ",
                                                   num_workers, " workers"));
  }
  if (membership.worker_ids_size() != num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("MEMBERSHIP names ", num_workers,
                                                   " workers but carries ",
                                                   membership.worker_ids_size(), " ids"));
  }
  const int64_t join_clock = membership.join_clock();
  if (join_clock < 0 || join_clock > kMaxJoinClock) {
    return absl::InvalidArgumentError(absl::StrCat("MEMBERSHIP: join clock ", join_clock,
                                                   " out of range"));
  }
  if (options_.sync == proto::BSP) {
    for (const auto& [key, held] : partitions_) {
      // A clock from join_clock on that completed without the joiner would break bsp.
      if (held->aggregator->clock() > join_clock) {
        ReleaseHold();
        return absl::FailedPreconditionError(absl::StrCat(
            "a worker cannot join at clock ", join_clock, ": partition ", key,
            " is at clock ", held->aggregator->clock(), " already"));
      }
    }
  }
  const bool ssp = options_.sync == proto::SSP;
  for (auto& [key, held] : partitions_) {
    // An ssp joiner counts as having pushed the clocks before its first.
    held->pushed.resize(num_workers, ssp ? join_clock : 0);
    if (held->aggregator != nullptr) held->aggregator->AddWorkers(num_workers);
  }
  live_workers_.resize(num_workers, true);
  joined_at_.resize(num_workers, join_clock);
  // Ranks keep their connections: a MEMBERSHIP can add workers, never rebind one.
  peers_.worker_ids.resize(num_workers_);
  for (int w = num_workers_; w < num_workers; ++w) {
    peers_.worker_ids.push_back(membership.worker_ids(w));
  }
  LOG(INFO) << "server " << rank_ << ": " << num_workers - num_workers_ << " worker(s) joined, "
            << num_workers << " in all"
            << (ssp || options_.sync == proto::BSP ? absl::StrCat(", from clock ", join_clock)
                                                    : "");
  num_workers_ = num_workers;
  ReleaseHold();
  return absl::OkStatus();
}

void ServerHandler::ReleaseHold() {
  if (!hold_after_.has_value()) return;
  hold_after_.reset();
  for (auto& [key, held] : partitions_) {
    MaybeCompleteClock(*held);
    ReleaseParkedPulls(*held);
  }
}

void ServerHandler::SetDepartedWorkers(const std::vector<int>& departed) {
  absl::MutexLock lock(&mu_);
  bool changed = false;
  for (int w : departed) {
    if (w >= 0 && w < num_workers_ && live_workers_[w]) {
      live_workers_[w] = false;
      changed = true;
      LOG(INFO) << "server " << rank_ << ": worker " << w << " left; no longer waiting for it";
    }
  }
  if (!changed) return;
  for (auto& [key, held] : partitions_) {
    MaybeCompleteClock(*held);
    ReleaseParkedPulls(*held);
  }
}

}  // namespace r2sp
