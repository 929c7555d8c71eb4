// See server_handler.h.
#include "server/server_handler.h"

#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace r2sp {
namespace {

// Bounds a predicted pull's update count (a worker asks for W - 1).
constexpr int kMaxPredictedUpdates = 1 << 16;

bool IsFloatAligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % alignof(float) == 0;
}

}  // namespace

ServerHandler::ServerHandler(const ServerOptions& options) : options_(options) {}

void ServerHandler::Configure(int rank, int num_workers, const ModelLayout& layout) {
  absl::MutexLock lock(&mu_);
  CHECK(!configured_) << "ServerHandler::Configure called twice";
  rank_ = rank;
  num_workers_ = num_workers;
  live_workers_.assign(num_workers, true);
  for (uint64_t key : layout.KeysOf(rank)) {
    const Partition& p = *layout.Find(key);
    auto slot = std::make_unique<Slot>(p.num_elements, num_workers);
    if (options_.sync == proto::BSP) {
      slot->aggregator = std::make_unique<ClockAggregator>(p.num_elements, num_workers);
    }
    slots_.emplace(key, std::move(slot));
  }
  configured_ = true;
  LOG(INFO) << "server " << rank << " holds " << slots_.size() << " partitions, "
            << layout.BytesOf(rank) << " bytes";
}

proto::NodeCounters ServerHandler::counters() const {
  absl::MutexLock lock(&mu_);
  return CountersLocked();
}

proto::NodeCounters ServerHandler::CountersLocked() const {
  proto::NodeCounters c;
  c.set_bytes_pushed(counters_.bytes_pushed);
  c.set_bytes_pulled(counters_.bytes_pulled);
  c.set_pushes(counters_.pushes);
  c.set_pulls(counters_.pulls);
  c.set_dropped_messages(counters_.rejected);
  return c;
}

std::optional<std::vector<float>> ServerHandler::Weights(uint64_t key) const {
  absl::MutexLock lock(&mu_);
  auto it = slots_.find(key);
  if (it == slots_.end()) return std::nullopt;
  const PartitionState& state = it->second->state;
  return std::vector<float>(state.weights(), state.weights() + state.num_elements());
}

void ServerHandler::HandleRequest(Message request, Responder responder) {
  absl::MutexLock lock(&mu_);
  switch (request.header.type()) {
    case proto::PUSH:
      HandlePush(request, responder);
      return;
    case proto::PULL:
      HandlePull(request, responder);
      return;
    case proto::MEMBERSHIP: {
      if (request.header.sender_role() != proto::SCHEDULER) {
        Reject(responder, absl::InvalidArgumentError("only the scheduler changes membership"));
        return;
      }
      absl::Status grown = GrowWorkers(request.header.membership().num_workers());
      if (!grown.ok()) return Reject(responder, grown);
      responder.ReplyStatus(absl::OkStatus());
      return;
    }
    case proto::SHUTDOWN: {
      if (request.header.sender_role() != proto::SCHEDULER) {
        Reject(responder, absl::InvalidArgumentError("only the scheduler may shut a server down"));
        return;
      }
      Message reply;
      *reply.header.mutable_counters() = CountersLocked();
      responder.Reply(std::move(reply));
      if (!shutdown_requested_.HasBeenNotified()) shutdown_requested_.Notify();
      return;
    }
    default:
      Reject(responder, absl::InvalidArgumentError(absl::StrCat(
                            "a server does not handle ", proto::MsgType_Name(request.header.type()))));
  }
}

SgdOptions ServerHandler::SgdFor(const Slot& slot) const {
  SgdOptions sgd = options_.sgd;
  sgd.learning_rate *= options_.schedule.Factor(static_cast<int64_t>(slot.steps + 1e-6));
  return sgd;
}

void ServerHandler::Reject(Responder& responder, const absl::Status& status) {
  ++counters_.rejected;
  LOG(WARNING) << "rejected request: " << status;
  responder.ReplyStatus(status);
}

absl::Status ServerHandler::CheckSender(const proto::Header& header) const {
  if (!configured_) return absl::UnavailableError("server is not configured yet");
  if (header.sender_role() != proto::WORKER) {
    return absl::InvalidArgumentError("PUSH and PULL come from workers only");
  }
  if (header.sender_rank() < 0 || header.sender_rank() >= num_workers_) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown worker rank ", header.sender_rank()));
  }
  return absl::OkStatus();
}

absl::StatusOr<ServerHandler::Slot*> ServerHandler::FindSlot(uint64_t key) {
  auto it = slots_.find(key);
  if (it == slots_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("key ", key, " is not held by server ", rank_));
  }
  return it->second.get();
}

void ServerHandler::HandlePush(Message& request, Responder& responder) {
  const proto::Header& header = request.header;
  absl::Status status = CheckSender(header);
  if (!status.ok()) return Reject(responder, status);
  absl::StatusOr<Slot*> found = FindSlot(header.key());
  if (!found.ok()) return Reject(responder, found.status());
  Slot& slot = **found;
  if (request.payload.size() != 1 || request.payload[0].size() != slot.state.bytes()) {
    return Reject(responder, absl::InvalidArgumentError(absl::StrCat(
                                 "PUSH for key ", header.key(), " must carry one frame of ",
                                 slot.state.bytes(), " bytes, got ", PayloadBytes(request),
                                 " bytes in ", request.payload.size(), " frames")));
  }
  const float* grad = static_cast<const float*>(request.payload[0].data());
  if (!IsFloatAligned(grad)) {
    scratch_.resize(slot.state.num_elements());
    std::memcpy(scratch_.data(), grad, slot.state.bytes());
    grad = scratch_.data();
  }
  counters_.bytes_pushed += slot.state.bytes();
  ++counters_.pushes;

  if (header.push().init()) {
    if (slot.state.Init(grad)) ReleaseParkedPulls(slot);
    responder.ReplyStatus(absl::OkStatus());
    return;
  }
  if (!slot.state.initialized()) {
    return Reject(responder, absl::FailedPreconditionError(absl::StrCat(
                                 "partition ", header.key(), " has no initial value yet")));
  }
  const float weight = header.push().scale();
  if (!(weight >= 0.0f && weight <= 1.0f)) {
    return Reject(responder, absl::InvalidArgumentError(
                                 absl::StrCat("push scale must be in [0, 1], got ", weight)));
  }
  if (options_.sync == proto::BSP) {
    status = slot.aggregator->Add(header.sender_rank(), header.clock(), grad, weight);
    if (!status.ok()) return Reject(responder, status);
  } else {
    // A push is its fraction b_i / B of a step, or a whole one (unweighted, or classic ASP).
    const float fraction = options_.per_sample_updates && weight > 0.0f ? weight : 1.0f;
    const FractionalStep step = StepForFraction(SgdFor(slot), fraction);
    slot.state.Apply(step.options, step.grad_scale, grad);
    slot.steps += fraction;
  }
  ++slot.pushed[header.sender_rank()];
  responder.ReplyStatus(absl::OkStatus());
  MaybeCompleteClock(slot);
  ReleaseParkedPulls(slot);
}

void ServerHandler::MaybeCompleteClock(Slot& slot) {
  if (slot.aggregator != nullptr && slot.aggregator->Complete(live_workers_)) {
    slot.state.Apply(SgdFor(slot), slot.aggregator->scale(), slot.aggregator->sum());
    slot.steps += 1;
    slot.aggregator->Advance();
  }
}

absl::Status ServerHandler::GrowWorkers(int num_workers) {
  if (!configured_) return absl::UnavailableError("server is not configured yet");
  if (num_workers < num_workers_ || num_workers > num_workers_ + 1024) {
    return absl::InvalidArgumentError(absl::StrCat("cannot go from ", num_workers_, " to ",
                                                   num_workers, " workers"));
  }
  if (options_.sync == proto::BSP || options_.sync == proto::SSP) {
    return absl::FailedPreconditionError("bsp and ssp jobs do not take workers that join late");
  }
  for (auto& [key, slot] : slots_) slot->pushed.resize(num_workers, 0);
  live_workers_.resize(num_workers, true);
  LOG(INFO) << "server " << rank_ << ": " << num_workers - num_workers_ << " worker(s) joined, "
            << num_workers << " in all";
  num_workers_ = num_workers;
  return absl::OkStatus();
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
  for (auto& [key, slot] : slots_) {
    MaybeCompleteClock(*slot);
    ReleaseParkedPulls(*slot);
  }
}

bool ServerHandler::PullReady(const Slot& slot, int64_t min_version, int64_t min_clock) const {
  if (!slot.state.initialized() || slot.state.version() < min_version) return false;
  if (min_clock > 0) {
    for (int w = 0; w < num_workers_; ++w) {
      if (live_workers_[w] && slot.pushed[w] < min_clock) return false;
    }
  }
  return true;
}

void ServerHandler::HandlePull(Message& request, Responder& responder) {
  const proto::Header& header = request.header;
  absl::Status status = CheckSender(header);
  if (!status.ok()) return Reject(responder, status);
  absl::StatusOr<Slot*> found = FindSlot(header.key());
  if (!found.ok()) return Reject(responder, found.status());
  if (!request.payload.empty()) {
    return Reject(responder, absl::InvalidArgumentError("PULL carries no payload"));
  }
  Slot& slot = **found;
  const proto::PullInfo& info = header.pull();
  if (info.predict_fraction() != 0.0f || info.predict_updates() != 0) {
    if (options_.sync == proto::BSP) {
      return Reject(responder, absl::InvalidArgumentError(
                                   "predicted pulls are for asynchronous modes, not bsp"));
    }
    if (!(info.predict_fraction() > 0.0f && info.predict_fraction() <= 1.0f) ||
        info.predict_updates() < 1 || info.predict_updates() > kMaxPredictedUpdates) {
      return Reject(responder, absl::InvalidArgumentError(absl::StrCat(
                                   "a predicted pull needs a fraction in (0, 1] and 1 to ",
                                   kMaxPredictedUpdates, " updates, got ",
                                   info.predict_fraction(), " and ", info.predict_updates())));
    }
  }
  ParkedPull pull{info.min_version(), info.min_clock(), info.predict_fraction(),
                  info.predict_updates(), absl::Time(), std::move(responder)};
  if (PullReady(slot, pull.min_version, pull.min_clock)) {
    AnswerPull(slot, pull, 0.0);
  } else {
    pull.since = absl::Now();
    slot.parked_pulls.push_back(std::move(pull));
  }
}

void ServerHandler::AnswerPull(Slot& slot, ParkedPull& pull, double waited) {
  Message reply;
  reply.header.set_clock(slot.state.version());
  if (waited > 0) reply.header.mutable_pull_reply()->set_waited_seconds(waited);
  if (pull.predict_updates > 0) {
    // The updates to come carry the fraction between them (or are whole steps each).
    const float each = options_.per_sample_updates
                           ? pull.predict_fraction / static_cast<float>(pull.predict_updates)
                           : 1.0f;
    reply.payload.push_back(slot.state.PredictedPullFrame(
        PredictionFor(SgdFor(slot), each, pull.predict_updates)));
  } else {
    reply.payload.push_back(slot.state.PullFrame());
  }
  counters_.bytes_pulled += slot.state.bytes();
  ++counters_.pulls;
  pull.responder.Reply(std::move(reply));
}

void ServerHandler::ReleaseParkedPulls(Slot& slot) {
  if (slot.parked_pulls.empty() || !slot.state.initialized()) return;
  std::vector<ParkedPull> still_waiting;
  const absl::Time now = absl::Now();
  for (ParkedPull& pull : slot.parked_pulls) {
    if (PullReady(slot, pull.min_version, pull.min_clock)) {
      AnswerPull(slot, pull, absl::ToDoubleSeconds(now - pull.since));
    } else {
      still_waiting.push_back(std::move(pull));
    }
  }
  slot.parked_pulls = std::move(still_waiting);
}

}  // namespace r2sp
