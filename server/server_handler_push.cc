// ServerHandler's PUSH path (server_handler.h): a push's checks, its gradient applied on
// arrival or added to its bsp clock (with the script's optimizer the push carries, if any),
// skip pushes, elastic differences, and a clock completed once every live worker's push is in.
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/sync_modes.h"
#include "server/server_handler.h"

namespace r2sp {
namespace {

// InvalidArgument for an AVERAGE run outside bsp: only a clock has an average.
absl::Status CheckAverageRuns(const std::vector<wire::OptimizerRun>& runs, proto::SyncMode sync) {
  if (sync == proto::BSP) return absl::OkStatus();
  for (const wire::OptimizerRun& run : runs) {
    if (run.settings.kind() == proto::OPTIMIZER_AVERAGE) {
      return absl::InvalidArgumentError(absl::StrCat(
          "optimizer settings: AVERAGE (each worker applies its own optimizer to the clock's "
          "averaged gradient) needs bsp; this job's mode is ", SyncModeName(sync)));
    }
  }
  return absl::OkStatus();
}

// The script's optimizer a push carried (none: the partition keeps its latest).
void AdoptScriptRuns(HeldPartition& held, std::vector<wire::OptimizerRun> runs) {
  if (runs.empty()) return;
  held.script_sgd = AsServerSgd(runs);
  held.script_runs = std::move(runs);
}

}  // namespace

absl::Status ServerHandler::HandlePush(Message& request, Responder& responder) {
  const proto::Header& header = request.header;
  R2SP_ASSIGN_OR_RETURN(HeldPartition* const found, FindPartition(header, responder));
  HeldPartition& held = *found;
  if (header.push().skip()) return HandleSkip(request, held, responder);
  R2SP_ASSIGN_OR_RETURN(const wire::GradientView grad,
                        decoder_.Decode(request, held.state.num_elements()));
  counters_.bytes_pushed += PayloadBytes(request);
  ++counters_.pushes;

  if (header.push().init()) {
    if (held.state.Init(grad.dense)) ReleaseParkedPulls(held);
    responder.ReplyStatus(absl::OkStatus());
    return absl::OkStatus();
  }
  R2SP_RETURN_IF_ERROR(CheckGradientPush(held, header));
  const bool rounds = RoundSynchronous(options_.sync);
  if (rounds && header.clock() < held.restored_clock && header.clock() >= 0) {
    responder.ReplyStatus(absl::OkStatus());  // applied before the checkpoint
    return absl::OkStatus();
  }
  // In asynchronous modes pushed[w] is past every clock of w's applied pushes.
  if (!rounds && header.push().retry() &&
      header.clock() < held.pushed[header.sender_rank()]) {
    ++counters_.repeated_pushes;
    responder.ReplyStatus(absl::OkStatus());  // a retry of a push applied already
    return absl::OkStatus();
  }
  std::vector<wire::OptimizerRun> runs;  // none: the partition's latest
  if (header.push().has_optimizer() && !Elastic(options_.sync)) {
    R2SP_ASSIGN_OR_RETURN(runs, wire::DecodeOptimizerRuns(header.push().optimizer(),
                                                          held.state.num_elements()));
    R2SP_RETURN_IF_ERROR(CheckAverageRuns(runs, options_.sync));
  }
  R2SP_RETURN_IF_ERROR(ApplyPush(held, header, grad, std::move(runs)));
  responder.ReplyStatus(absl::OkStatus());
  MaybeCompleteClock(held);
  MaybeSnapshotAtSteps(&held);
  ReleaseParkedPulls(held);
  return absl::OkStatus();
}

absl::Status ServerHandler::CheckGradientPush(const HeldPartition& held,
                                              const proto::Header& header) const {
  if (!held.state.initialized()) {
    return absl::FailedPreconditionError(
        absl::StrCat("partition ", header.key(), " has no initial value yet"));
  }
  const float weight = header.push().scale();
  if (!(weight >= 0.0f && weight <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("push scale must be in [0, 1], got ", weight));
  }
  return absl::OkStatus();
}

absl::Status ServerHandler::HandleSkip(const Message& request, HeldPartition& held,
                                       Responder& responder) {
  const proto::Header& header = request.header;
  if (!request.payload.empty() || header.push().init()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a skip push of partition ", header.key(), " carries no values and is not an init"));
  }
  if (Elastic(options_.sync)) {
    return absl::InvalidArgumentError("easgd and eawild push differences, not gradients: "
                                      "there is no step to skip");
  }
  R2SP_RETURN_IF_ERROR(CheckGradientPush(held, header));
  ++counters_.pushes;
  const int w = header.sender_rank();
  const float weight = header.push().scale();
  if (options_.sync == proto::BSP) {
    if (header.clock() >= held.restored_clock || header.clock() < 0) {  // else applied already
      R2SP_RETURN_IF_ERROR(held.aggregator->Skip(w, header.clock(), weight));
      ++held.pushed[w];
    }
  } else {
    held.pushed[w] = std::max(held.pushed[w] + 1, header.clock() + 1);
  }
  responder.ReplyStatus(absl::OkStatus());
  MaybeCompleteClock(held);
  MaybeSnapshotAtSteps(&held);
  ReleaseParkedPulls(held);
  return absl::OkStatus();
}

absl::Status ServerHandler::ApplyPush(HeldPartition& held, const proto::Header& header,
                                      const wire::GradientView& grad,
                                      std::vector<wire::OptimizerRun> runs) {
  const int w = header.sender_rank();
  const float weight = header.push().scale();
  if (Elastic(options_.sync)) return AddElastic(held, header, grad);
  if (options_.sync == proto::BSP) {
    R2SP_RETURN_IF_ERROR(held.aggregator->Add(w, header.clock(), grad, weight));
    ++held.pushed[w];
    AdoptScriptRuns(held, std::move(runs));  // for the clock's update
    return absl::OkStatus();
  }
  AdoptScriptRuns(held, std::move(runs));
  // A push is its fraction b_i / B of a step, or a whole one (unweighted, or classic ASP).
  const float fraction = options_.per_sample_updates && weight > 0.0f ? weight : 1.0f;
  const FractionalStep step = StepForFraction(SgdFor(held), fraction);
  const HeldPartition::PredictAsk& ask = held.asked[w];  // sized as pushed, w checked as there
  if (!held.script_runs.empty() && !held.script_sgd) {
    held.state.Apply(held.script_runs, 1.0f, fraction, held.steps + fraction, grad);
  } else if (ask.updates > 0 && grad.kind == wire::GradientView::Kind::kDense) {
    // The pusher's pull comes next (r2sp: it holds the slot): its predicted weights are
    // computed in the update's own pass.
    held.state.ApplyForeseeing(
        step.options, step.grad_scale, grad.dense,
        replier_.PredictionFor(held, held.steps + fraction, ask.fraction, ask.updates));
  } else {
    held.state.Apply(step.options, step.grad_scale, grad);
  }
  held.steps += fraction;
  held.pushed[w] = std::max(held.pushed[w] + 1, header.clock() + 1);
  return absl::OkStatus();
}

absl::Status ServerHandler::AddElastic(HeldPartition& held, const proto::Header& header,
                                       const wire::GradientView& grad) {
  const int w = header.sender_rank();
  if (options_.sync == proto::EASGD) {
    // The round's sum, added once every live worker's difference is in (MaybeCompleteClock).
    R2SP_RETURN_IF_ERROR(held.aggregator->Add(w, header.clock(), grad, /*weight=*/1.0f));
    ++held.pushed[w];
    return absl::OkStatus();
  }
  // eawild: this partition's add is the unit that is atomic (under mu_); nothing spans
  // partitions, so a pull may see one partition with a difference and another without.
  held.state.Add(grad);
  const float weight = header.push().scale();
  held.steps += options_.elastic_period * (weight > 0.0f ? weight : 1.0f);
  held.pushed[w] = std::max(held.pushed[w] + 1, header.clock() + 1);
  return absl::OkStatus();
}

void ServerHandler::MaybeCompleteClock(HeldPartition& held) {
  if (held.aggregator == nullptr) return;
  if (roster_.Holds(held.aggregator->clock())) return;  // a join
  if (held.aggregator->Complete(roster_.live(), roster_.joined_at())) {
    if (options_.sync == proto::EASGD) {
      held.state.Add(held.aggregator->sum());  // the centre moves by the round's sum
      held.steps += options_.elastic_period;
    } else if (held.aggregator->contributors() == 0) {  // every worker skipped the clock
      held.state.Skip(held.script_runs);
      held.steps += 1;
    } else if (!held.script_runs.empty() && !held.script_sgd) {
      held.state.Apply(held.script_runs, held.aggregator->scale(), 1.0f, held.steps + 1,
                       wire::GradientView::Dense(held.aggregator->sum(),
                                                 held.state.num_elements()));
      held.steps += 1;
    } else {
      held.state.Apply(SgdFor(held), held.aggregator->scale(), held.aggregator->sum());
      held.steps += 1;
    }
    held.aggregator->Advance();
  }
}

}  // namespace r2sp
