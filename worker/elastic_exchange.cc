// See elastic_exchange.h.
#include "worker/elastic_exchange.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace r2sp {

ElasticExchange::ElasticExchange(proto::SyncMode sync, const ElasticOptions& options,
                                 PsClient* ps, proto::Codec pull_codec)
    : sync_(sync),
      options_(options),
      ps_(ps),
      pull_codec_(pull_codec),
      momentum_(options.local_step ? ps->layout().total_elements() : 0, 0.0f),
      centre_(ps->layout().total_elements(), 0.0f),
      difference_(ps->layout().total_elements(), 0.0f),
      unsent_(ps->sparse_pushes() ? ps->layout().total_elements() : 0, 0.0f) {}

Ticket StartCentrePull(PsClient* ps, proto::SyncMode sync, int64_t rounds, proto::Codec codec,
                       float* out) {
  PullOptions pull;
  pull.codec = codec;
  if (sync == proto::EASGD) pull.min_version = rounds;
  return ps->Pull(out, pull);
}

absl::Status PullCentre(PsClient* ps, proto::SyncMode sync, int64_t rounds, float* out,
                        const std::function<bool()>& interrupted) {
  const Ticket ticket = StartCentrePull(ps, sync, rounds, proto::FP32, out);
  while (!ticket.WaitFor(absl::Milliseconds(100))) {
    if (interrupted && interrupted()) return absl::CancelledError("interrupted");
  }
  R2SP_RETURN_IF_ERROR_WITH(ticket.Wait(), "pulling the centre");
  return absl::OkStatus();
}

absl::Status ElasticExchange::PullCentreFor(int64_t round, proto::Codec codec, double* parked) {
  Ticket ticket = StartCentrePull(ps_, sync_, round, codec, centre_.data());
  R2SP_RETURN_IF_ERROR_WITH(ticket.Wait(), "pulling the centre");
  *parked = ticket.waited_seconds();
  return absl::OkStatus();
}

absl::StatusOr<ElasticStepTimes> ElasticExchange::Step(int64_t clock, HostGradient grads,
                                                       float* params, float push_scale,
                                                       float weight) {
  const size_t n = centre_.size();
  if (options_.local_step) {
    if (grads.fp32 == nullptr) {
      return absl::InternalError("elastic averaging needs the gradient in fp32");
    }
    SgdApply(options_.sgd, /*scale=*/1.0f, grads.fp32, params, params, momentum_.data(), n);
  }
  const int64_t period = options_.period;
  rounds_ = (clock + 1) / period;  // rounds up to this step (a resumed run starts mid-job)
  ElasticStepTimes t;
  if ((clock + 1) % period != 0) return t;
  const int64_t round = rounds_ - 1;
  t.exchanged = true;
  t.pull_started = absl::Now();
  R2SP_RETURN_IF_ERROR(PullCentreFor(round, pull_codec_, &t.parked_seconds));
  t.pull_done = absl::Now();
  const float alpha = options_.alpha;
  float* d = difference_.data();
  const float* c = centre_.data();
  for (size_t i = 0; i < n; ++i) {
    const float own = alpha * (params[i] - c[i]);
    params[i] = params[i] - own;
    d[i] = own * weight;  // exact for weight 1
  }
  const Ticket pushed = ps_->Push(difference_.data(), round, /*init=*/false, push_scale);
  // A sparse push codec sent part of w * d (encoded before Push returned): the worker moves by
  // the part sent only, and the rest stays in x - c for the next period's difference.
  if (ps_->sparse_pushes()) {
    ps_->TakeSparseResiduals(unsent_.data());
    const float keep = 1.0f / weight;
    for (size_t i = 0; i < n; ++i) params[i] += unsent_[i] * keep;
  }
  R2SP_RETURN_IF_ERROR_WITH(pushed.Wait(),
                            absl::StrCat("pushing the elastic difference of round ", round));
  t.push_done = absl::Now();
  return t;
}

absl::StatusOr<const float*> ElasticExchange::PullCentre() {
  double parked = 0;
  R2SP_RETURN_IF_ERROR(PullCentreFor(rounds_ < 0 ? 0 : rounds_, proto::FP32, &parked));
  return centre_.data();
}

}  // namespace r2sp
