// See exchange.h.
#include "worker/exchange.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace r2sp {
namespace {

absl::Status Annotate(const absl::Status& s, const char* what) {
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

}  // namespace

absl::StatusOr<int> Exchange(const ExchangeOptions& options, PsClient* ps,
                             SchedulerClient* scheduler, const float* grads, float* params,
                             float scale, bool last, absl::Time computed, IterationMetrics* m,
                             RunLog* log) {
  const bool r2sp = options.sync == proto::R2SP;
  int assigned = 0;
  absl::Time granted = computed;
  if (r2sp) {
    absl::StatusOr<proto::SlotGrant> grant =
        scheduler->RequestSlot(m->batch, m->compute_seconds, options.previous_comm_seconds,
                               options.iterations_left);
    if (!grant.ok()) return Annotate(grant.status(), "waiting for a slot");
    granted = absl::Now();
    m->gap_seconds = grant->gap_seconds();
    assigned = grant->batch().batch_size();
    if (log != nullptr) {
      log->Span("wait", computed, granted,
                absl::StrCat("{\"gap_ms\": ", m->gap_seconds * 1e3, ", \"grant\": ",
                             grant->grant_index(), "}"));
    }
  }
  absl::Status pushed = ps->Push(grads, m->clock, /*init=*/false, scale).Wait();
  if (!pushed.ok()) return Annotate(pushed, "push");
  const absl::Time after_push = absl::Now();
  // The last slot takes the worker out of the ring, so workers with more steps to go (one that
  // joined late, say) do not wait for its turn.
  if (r2sp && !options.slot_includes_pull) scheduler->ReleaseSlot(/*leaving=*/last);
  PullOptions pull_options;
  pull_options.min_version = options.sync == proto::BSP ? m->clock + 1 : 0;
  pull_options.min_clock =
      options.sync == proto::SSP ? std::max<int64_t>(0, m->clock + 1 - options.staleness) : 0;
  pull_options.predict_fraction = options.predict_fraction;
  pull_options.predict_updates = options.predict_updates;
  Ticket pull = ps->Pull(params, pull_options);
  absl::Status pulled = pull.Wait();
  if (!pulled.ok()) return Annotate(pulled, "pull");
  const absl::Time after_pull = absl::Now();
  if (r2sp && options.slot_includes_pull) scheduler->ReleaseSlot(/*leaving=*/last);
  const uint64_t bytes = ps->layout().total_bytes();
  m->wait_seconds = absl::ToDoubleSeconds(granted - computed) + pull.waited_seconds();
  m->push_seconds = absl::ToDoubleSeconds(after_push - granted);
  m->pull_seconds = absl::ToDoubleSeconds(after_pull - after_push);
  m->parked_seconds = pull.waited_seconds();
  m->push_bytes = m->pull_bytes = bytes;
  if (log != nullptr) {
    log->Span("push", granted, after_push);
    log->Span("pull", after_push, after_pull,
              absl::StrCat("{\"parked_ms\": ", pull.waited_seconds() * 1e3, "}"));
  }
  return assigned;
}

}  // namespace r2sp
