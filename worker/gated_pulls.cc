// See gated_pulls.h.
#include "worker/gated_pulls.h"

#include <utility>

#include "glog/logging.h"

namespace r2sp {

PullGate::PullGate(size_t pushes, int limit) : limit_(limit), pushes_left_(pushes) {
  CHECK_GE(limit, 0) << "a negative limit of pulls in flight";
}

std::vector<uint64_t> PullGate::Pushed(uint64_t key, bool ok) {
  absl::MutexLock lock(&mu_);
  if (pushes_left_ > 0) --pushes_left_;
  if (ok) waiting_.insert(key);
  return Release(/*all=*/limit_ == 0 || pushes_left_ == 0);
}

std::vector<uint64_t> PullGate::Landed() {
  absl::MutexLock lock(&mu_);
  if (in_flight_ > 0) --in_flight_;
  return Release(/*all=*/pushes_left_ == 0);
}

std::vector<uint64_t> PullGate::Release(bool all) {
  std::vector<uint64_t> keys;
  while (!waiting_.empty() && (all || in_flight_ < limit_)) {
    keys.push_back(*waiting_.begin());
    waiting_.erase(waiting_.begin());
    ++in_flight_;
  }
  return keys;
}

struct GatedPulls::Round {
  Round(size_t pushes, int limit, float* params, const PullOptions& options, Ticket pulls)
      : gate(pushes, limit), params(params), options(options), pulls(std::move(pulls)) {}
  PullGate gate;
  float* const params;
  const PullOptions options;
  const Ticket pulls;
};

void GatedPulls::Start(size_t pushes, float* params, const PullOptions& options,
                       const Ticket& pulls) {
  round_ = std::make_shared<Round>(pushes, limit_, params, options, pulls);
}

Ticket GatedPulls::Push(uint64_t key, HostGradient data, int64_t clock, float scale) {
  CHECK(round_ != nullptr) << "GatedPulls::Push before Start";
  PsClient* ps = ps_;
  return ps_->PushPartitionThen(
      key, data, clock, scale, [ps, key, round = round_](const absl::Status& status) {
        if (!status.ok()) PsClient::AbortPull(round->pulls, key);
        Send(ps, round, round->gate.Pushed(key, status.ok()));
      });
}

void GatedPulls::Send(PsClient* ps, const std::shared_ptr<Round>& round,
                      const std::vector<uint64_t>& keys) {
  for (const uint64_t key : keys) {
    ps->PullPartition(key, round->params, round->options, round->pulls,
                      [ps, round] { Send(ps, round, round->gate.Landed()); });
  }
}

}  // namespace r2sp
