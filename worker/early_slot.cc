// See early_slot.h.
#include "worker/early_slot.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"

namespace r2sp {
namespace {

// Weight of the newest iteration in the smoothed compute and push times.
constexpr double kSmoothing = 0.5;

double Smooth(double smoothed, double sample) {
  return smoothed <= 0 ? sample : (1 - kSmoothing) * smoothed + kSmoothing * sample;
}

}  // namespace

absl::Time EarlyAskTime(absl::Time start, double compute_seconds, double push_seconds) {
  if (compute_seconds <= 0) return absl::InfiniteFuture();
  return start + absl::Seconds(std::max(0.0, compute_seconds - std::max(0.0, push_seconds)));
}

EarlySlot::EarlySlot(SchedulerClient* scheduler, BucketPusher* pusher)
    : scheduler_(scheduler), shared_(std::make_shared<Shared>()) {
  absl::MutexLock lock(&shared_->mu);
  shared_->pusher = pusher;
}

EarlySlot::~EarlySlot() {
  absl::MutexLock lock(&shared_->mu);
  shared_->pusher = nullptr;
}

void EarlySlot::Begin(absl::Time start, const SlotReport& previous) {
  {
    absl::MutexLock lock(&shared_->mu);
    iteration_ = ++shared_->iteration;
    shared_->asked = false;
    shared_->grant.reset();
  }
  // No prediction before the first Record: the first iteration asks after compute.
  const absl::Time due = EarlyAskTime(start, compute_seconds_, push_seconds_);
  if (due == absl::InfiniteFuture()) return;
  timer_.After(std::max(absl::ZeroDuration(), due - absl::Now()),
               [this, iteration = iteration_, previous] { AskOnce(iteration, previous); });
}

void EarlySlot::AskOnce(uint64_t iteration, const SlotReport& report) {
  {
    absl::MutexLock lock(&shared_->mu);
    if (shared_->iteration != iteration || shared_->asked) return;
    shared_->asked = true;
  }
  scheduler_->RequestSlotAsync(
      report.samples, report.compute_seconds, report.comm_seconds, report.iterations_left,
      [shared = shared_, iteration](absl::StatusOr<proto::SlotGrant> grant) {
        absl::MutexLock lock(&shared->mu);
        if (shared->iteration != iteration) return;  // cannot happen: Await waits for it
        // Open first: once Await sees the grant, every complete partition is on its way.
        if (grant.ok() && shared->pusher != nullptr) shared->pusher->Open();
        shared->granted = absl::Now();
        shared->grant = std::move(grant);
      });
}

absl::StatusOr<proto::SlotGrant> EarlySlot::Await(const SlotReport& current,
                                                  absl::Time* granted) {
  AskOnce(iteration_, current);
  absl::MutexLock lock(&shared_->mu);
  shared_->mu.Await(absl::Condition(shared_.get(), &Shared::Arrived));
  *granted = shared_->granted;
  return *shared_->grant;
}

void EarlySlot::Record(double compute_seconds, absl::Time push_ended, bool waited_for_backward) {
  compute_seconds_ = Smooth(compute_seconds_, compute_seconds);
  if (waited_for_backward) return;
  absl::Time granted;
  {
    absl::MutexLock lock(&shared_->mu);
    if (!shared_->Arrived() || !shared_->grant->ok()) return;
    granted = shared_->granted;
  }
  push_seconds_ = Smooth(push_seconds_, absl::ToDoubleSeconds(push_ended - granted));
}

}  // namespace r2sp
