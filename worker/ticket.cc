// Ticket (ps_client.h): a group of requests' completion, waited for whole or by key, and what
// their replies said (the first error, the longest wait, the fewest steps pulled).
#include <algorithm>

#include "worker/ps_client.h"

namespace r2sp {

absl::Status Ticket::Wait() const {
  if (state_ == nullptr) return absl::OkStatus();
  absl::MutexLock lock(&state_->mu);
  state_->mu.Await(absl::Condition(
      +[](State* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) { return s->outstanding == 0; },
      state_.get()));
  return state_->status;
}

bool Ticket::Done() const {
  if (state_ == nullptr) return true;
  absl::MutexLock lock(&state_->mu);
  return state_->outstanding == 0;
}

bool Ticket::WaitFor(absl::Duration timeout) const {
  if (state_ == nullptr) return true;
  absl::MutexLock lock(&state_->mu);
  return state_->mu.AwaitWithTimeout(
      absl::Condition(
          +[](State* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) { return s->outstanding == 0; },
          state_.get()),
      timeout);
}

absl::Status Ticket::WaitKeys(uint64_t first, uint64_t last) const {
  if (state_ == nullptr) return absl::OkStatus();
  struct Range {
    State* s;
    uint64_t first, last;
    bool Answered() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) {
      if (s->outstanding == 0 || s->failed > 0) return true;
      if (last >= s->answered.size()) return false;  // not a by-key group: all of it
      for (uint64_t k = first; k <= last; ++k) {
        if (!s->answered[k]) return false;
      }
      return true;
    }
  };
  const Range range{state_.get(), first, last};
  absl::MutexLock lock(&state_->mu);
  state_->mu.Await(absl::Condition(&range, &Range::Answered));
  return state_->status;
}

absl::Time Ticket::finished() const {
  if (state_ == nullptr) return absl::InfinitePast();
  absl::MutexLock lock(&state_->mu);
  return state_->finished;
}

double Ticket::waited_seconds() const {
  if (state_ == nullptr) return 0;
  absl::MutexLock lock(&state_->mu);
  return state_->waited;
}

double Ticket::min_steps() const {
  if (state_ == nullptr) return 0;
  absl::MutexLock lock(&state_->mu);
  return std::max(0.0, state_->min_steps);
}

double Ticket::min_restored_steps() const {
  if (state_ == nullptr) return 0;
  absl::MutexLock lock(&state_->mu);
  return std::max(0.0, state_->min_restored_steps);
}

void Ticket::Complete(State& state, const absl::Status& status, double waited, double steps,
                      double restored_steps, int64_t key) {
  absl::MutexLock lock(&state.mu);
  if (!status.ok() && state.status.ok()) state.status = status;
  if (!status.ok()) ++state.failed;
  if (key >= 0 && static_cast<size_t>(key) < state.answered.size()) state.answered[key] = true;
  state.waited = std::max(state.waited, waited);
  auto keep_min = [](double& min, double value) {
    if (value >= 0) min = min < 0 ? value : std::min(min, value);
  };
  keep_min(state.min_steps, steps);
  keep_min(state.min_restored_steps, restored_steps);
  if (--state.outstanding == 0) state.finished = absl::Now();
}

}  // namespace r2sp
