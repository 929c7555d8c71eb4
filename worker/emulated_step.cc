// See emulated_step.h.
#include "worker/emulated_step.h"

#include <thread>
#include <utility>

#include "absl/time/clock.h"

namespace r2sp {
namespace {

void SleepUntil(absl::Time due) {
  const absl::Duration wait = due - absl::Now();
  if (wait > absl::ZeroDuration()) std::this_thread::sleep_for(absl::ToChronoNanoseconds(wait));
}

}  // namespace

EmulatedStep::EmulatedStep(EmulatedStepSinks sinks) : sinks_(std::move(sinks)) {}

void EmulatedStep::Begin(absl::Time start) {
  start_ = start;
  stall_before_ = sinks_.pull_stall();
  paced_ = absl::ZeroDuration();
  held_.clear();
}

void EmulatedStep::Report(HostGradient grads, int64_t offset, int64_t count) {
  const absl::Duration stalled = Stalled();
  held_.push_back({absl::Now() - start_ - stalled - paced_, stalled, grads, offset, count});
}

void EmulatedStep::ParamsNeeded(int64_t offset, int64_t count) {
  if (stretch_ > 1.0) {
    const absl::Time before = absl::Now();
    const absl::Duration stalled = Stalled();
    SleepUntil(start_ + stalled + (before - start_ - stalled - paced_) * stretch_);
    paced_ += absl::Now() - before;
  }
  sinks_.needed(offset, count);
}

void EmulatedStep::Finish(double stretch) {
  for (const Held& h : held_) {
    SleepUntil(start_ + h.stalled + h.at * stretch);
    sinks_.ready(h.grads, h.offset, h.count);
  }
  held_.clear();
  stretch_ = stretch;
}

}  // namespace r2sp
