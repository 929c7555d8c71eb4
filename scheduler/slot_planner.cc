// See slot_planner.h.
#include "scheduler/slot_planner.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace r2sp {

SlotPlanner::SlotPlanner(double headroom, double smoothing, SlotOrder order,
                         double hold_multiple)
    : headroom_(headroom), smoothing_(smoothing), order_(order), hold_multiple_(hold_multiple) {
  CHECK_GT(headroom, 0);
  CHECK_GE(hold_multiple, 0);
  CHECK(smoothing > 0 && smoothing <= 1);
}

void SlotPlanner::SetMembers(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ring_ = std::move(ranks);
  finished_ = 0;
  next_ = 0;
  holds_.clear();
  waiting_.clear();
}

void SlotPlanner::Add(int rank) {
  if (std::find(ring_.begin(), ring_.end(), rank) != ring_.end()) return;
  auto it = std::lower_bound(ring_.begin(), ring_.end(), rank);
  const size_t index = static_cast<size_t>(it - ring_.begin());
  ring_.insert(it, rank);
  // Keep the turn on the same member: it moved right if the newcomer went before it.
  if (ring_.size() > 1 && index <= next_) ++next_;
}

void SlotPlanner::Remove(int rank, bool finished) {
  auto it = std::find(ring_.begin(), ring_.end(), rank);
  if (it == ring_.end()) return;
  const size_t index = static_cast<size_t>(it - ring_.begin());
  ring_.erase(it);
  if (finished) ++finished_;
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), rank), waiting_.end());
  holds_.erase(std::remove_if(holds_.begin(), holds_.end(),
                              [rank](const Hold& h) { return h.rank == rank; }),
               holds_.end());
  // Keep the turn on the same member: entries after the removed one shifted left.
  if (index < next_) --next_;
  if (ring_.empty() || next_ >= ring_.size()) next_ = 0;
}

absl::Status SlotPlanner::Request(int rank, double compute_seconds) {
  if (std::find(ring_.begin(), ring_.end(), rank) == ring_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("worker ", rank, " is not in the slot ring"));
  }
  if (std::find(waiting_.begin(), waiting_.end(), rank) != waiting_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("worker ", rank, " already waits for a slot"));
  }
  waiting_.push_back(rank);
  if (compute_seconds > 0) compute_.Add(compute_seconds, smoothing_);
  return absl::OkStatus();
}

absl::StatusOr<int> SlotPlanner::Release(int rank, absl::Time now) {
  auto it = std::find_if(holds_.begin(), holds_.end(),
                         [rank](const Hold& h) { return h.rank == rank; });
  if (it == holds_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("worker ", rank, " does not hold the slot"));
  }
  const int granted_width = it->granted_width;
  hold_.Add(std::max(0.0, absl::ToDoubleSeconds(now - it->granted)), smoothing_);
  holds_.erase(it);
  return granted_width;
}

void SlotPlanner::set_width(int width) {
  CHECK_GE(width, 1);
  width_ = width;
}

bool SlotPlanner::Holds(int rank) const {
  return std::any_of(holds_.begin(), holds_.end(),
                     [rank](const Hold& h) { return h.rank == rank; });
}

absl::Duration SlotPlanner::gap() const {
  if (ring_.empty() || !compute_.known) return absl::ZeroDuration();
  const double paper = compute_.mean / (headroom_ * (ring_.size() + finished_));
  if (hold_multiple_ == 0 || !hold_.known) return absl::Seconds(paper);
  return absl::Seconds(std::min(paper, hold_multiple_ * hold_.mean));
}

std::optional<int> SlotPlanner::Candidate() const {
  if (static_cast<int>(holds_.size()) >= width_ || ring_.empty() || waiting_.empty()) {
    return std::nullopt;
  }
  if (order_ == SlotOrder::kFirstCome) return waiting_.front();
  const int turn = ring_[next_];
  if (std::find(waiting_.begin(), waiting_.end(), turn) == waiting_.end()) return std::nullopt;
  return turn;
}

absl::Time SlotPlanner::NextWakeup() const {
  if (!Candidate().has_value()) return absl::InfiniteFuture();
  return last_grant_ + gap();
}

std::optional<int> SlotPlanner::Poll(absl::Time now) {
  const std::optional<int> candidate = Candidate();
  if (!candidate.has_value() || now < last_grant_ + gap()) return std::nullopt;
  const int rank = *candidate;
  waiting_.erase(std::find(waiting_.begin(), waiting_.end(), rank));
  holds_.push_back({rank, width_, now});
  last_grant_ = now;
  // The ring's turn moves past the one granted (in first-come order it is only bookkeeping).
  const size_t index =
      static_cast<size_t>(std::find(ring_.begin(), ring_.end(), rank) - ring_.begin());
  next_ = (index + 1) % ring_.size();
  ++grants_;
  if (grants_by_width_.size() <= static_cast<size_t>(width_)) grants_by_width_.resize(width_ + 1);
  ++grants_by_width_[width_];
  return rank;
}

}  // namespace r2sp
