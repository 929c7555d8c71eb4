// See server_handler.h.
#include "server/server_handler.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/codec/fp16.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace r2sp {
namespace {

// Bounds a predicted pull's update count (a worker asks for W - 1).
constexpr int kMaxPredictedUpdates = 1 << 16;
// Pulls one worker may have parked per partition.
constexpr int kMaxParkedPulls = 4;

// `weights` (fp32) rounded to binary16, in a frame of its own.
zmq::message_t Fp16Frame(const zmq::message_t& weights) {
  const size_t n = weights.size() / sizeof(float);
  zmq::message_t half(n * sizeof(uint16_t));
  codec::EncodeFp16(static_cast<const float*>(weights.data()), n,
                    static_cast<uint16_t*>(half.data()));
  return half;
}

}  // namespace

ServerHandler::ServerHandler(const ServerOptions& options, Clock clock)
    : options_(options),
      clock_(std::move(clock)),
      pool_(options.apply_threads > 1 ? std::make_unique<RangePool>(options.apply_threads)
                                      : nullptr) {}

void ServerHandler::Configure(int rank, const ServerPeers& peers, const ModelLayout& layout) {
  absl::MutexLock lock(&mu_);
  CHECK(!configured_) << "ServerHandler::Configure called twice";
  const int num_workers = static_cast<int>(peers.worker_ids.size());
  rank_ = rank;
  num_workers_ = num_workers;
  peers_ = peers;
  live_workers_.assign(num_workers, true);
  joined_at_.assign(num_workers, 0);
  for (uint64_t key : layout.KeysOf(rank)) {
    const Partition& p = *layout.Find(key);
    auto held = std::make_unique<HeldPartition>(p.num_elements, num_workers);
    held->state.set_pool(pool_.get());
    if (options_.sync == proto::BSP) {
      held->aggregator = std::make_unique<ClockAggregator>(p.num_elements, num_workers);
    }
    partitions_.emplace(key, std::move(held));
  }
  configured_ = true;
  LOG(INFO) << "server " << rank << " holds " << partitions_.size() << " partitions, "
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
  c.set_dropped_messages(refusals_.count());
  c.set_repeated_pushes(counters_.repeated_pushes);
  return c;
}

std::optional<std::vector<float>> ServerHandler::Weights(uint64_t key) const {
  absl::MutexLock lock(&mu_);
  auto it = partitions_.find(key);
  if (it == partitions_.end()) return std::nullopt;
  const PartitionState& state = it->second->state;
  return std::vector<float>(state.weights(), state.weights() + state.num_elements());
}

void ServerHandler::HandleRequest(Message request, Responder responder) {
  absl::MutexLock lock(&mu_);
  absl::Status status;
  switch (request.header.type()) {
    case proto::PUSH:
      status = HandlePush(request, responder);
      break;
    case proto::PULL:
      status = HandlePull(request, responder);
      break;
    case proto::MEMBERSHIP:
      status = HandleMembership(request, responder);
      break;
    case proto::SHUTDOWN:
      status = HandleShutdown(request, responder);
      break;
    default:
      status = absl::InvalidArgumentError(
          absl::StrCat("a server does not handle ", proto::MsgType_Name(request.header.type())));
  }
  if (!status.ok()) Reject(responder, status);
}

absl::Status ServerHandler::CheckScheduler(const Responder& responder, const char* what) const {
  if (!configured_) return absl::UnavailableError("server is not configured yet");
  if (responder.routing_id() != peers_.scheduler_id || !responder.MayBe(proto::SCHEDULER)) {
    return absl::PermissionDeniedError(absl::StrCat("only the scheduler may ", what));
  }
  return absl::OkStatus();
}

absl::Status ServerHandler::HandleShutdown(const Message& request, Responder& responder) {
  R2SP_RETURN_IF_ERROR(CheckScheduler(responder, "shut a server down"));
  Message reply;
  *reply.header.mutable_counters() = CountersLocked();
  responder.Reply(std::move(reply));
  if (!shutdown_requested_.HasBeenNotified()) shutdown_requested_.Notify();
  return absl::OkStatus();
}

SgdOptions ServerHandler::SgdFor(const HeldPartition& held) const {
  SgdOptions sgd = options_.sgd;
  sgd.learning_rate *= options_.schedule.Factor(static_cast<int64_t>(held.steps + 1e-6));
  return sgd;
}

void ServerHandler::Reject(Responder& responder, const absl::Status& status) {
  refusals_.Refuse(responder, status, clock_());
}

absl::Status ServerHandler::CheckSender(const proto::Header& header,
                                        const Responder& responder) const {
  if (!configured_) return absl::UnavailableError("server is not configured yet");
  constexpr PeerCheckWording kWording{"PUSH and PULL come from workers only",
                                      "unknown worker rank "};
  if (header.sender_role() != proto::WORKER) return absl::PermissionDeniedError(kWording.wrong_key);
  const int rank = header.sender_rank();
  const std::string* registered =
      rank >= 0 && rank < num_workers_ ? &peers_.worker_ids[rank] : nullptr;
  return CheckPeerConnection(responder, proto::WORKER, rank, registered, kWording);
}

absl::StatusOr<ServerHandler::HeldPartition*> ServerHandler::FindPartition(
    const proto::Header& header, const Responder& responder) {
  R2SP_RETURN_IF_ERROR(CheckSender(header, responder));
  auto it = partitions_.find(header.key());
  if (it == partitions_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("key ", header.key(), " is not held by server ", rank_));
  }
  return it->second.get();
}

absl::Status ServerHandler::HandlePush(Message& request, Responder& responder) {
  const proto::Header& header = request.header;
  R2SP_ASSIGN_OR_RETURN(HeldPartition* const found, FindPartition(header, responder));
  HeldPartition& held = *found;
  R2SP_ASSIGN_OR_RETURN(const GradientView grad,
                        decoder_.Decode(request, held.state.num_elements()));
  counters_.bytes_pushed += PayloadBytes(request);
  ++counters_.pushes;

  if (header.push().init()) {
    if (held.state.Init(grad.dense)) ReleaseParkedPulls(held);
    responder.ReplyStatus(absl::OkStatus());
    return absl::OkStatus();
  }
  if (!held.state.initialized()) {
    return absl::FailedPreconditionError(
        absl::StrCat("partition ", header.key(), " has no initial value yet"));
  }
  const float weight = header.push().scale();
  if (!(weight >= 0.0f && weight <= 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("push scale must be in [0, 1], got ", weight));
  }
  if (options_.sync == proto::BSP && header.clock() < held.restored_clock &&
      header.clock() >= 0) {
    responder.ReplyStatus(absl::OkStatus());  // applied before the checkpoint
    return absl::OkStatus();
  }
  const int w = header.sender_rank();
  // In asynchronous modes pushed[w] is past every clock of w's applied pushes.
  if (options_.sync != proto::BSP && header.push().retry() && header.clock() < held.pushed[w]) {
    ++counters_.repeated_pushes;
    responder.ReplyStatus(absl::OkStatus());  // a retry of a push applied already
    return absl::OkStatus();
  }
  if (options_.sync == proto::BSP) {
    R2SP_RETURN_IF_ERROR(held.aggregator->Add(w, header.clock(), grad, weight));
  } else {
    // A push is its fraction b_i / B of a step, or a whole one (unweighted, or classic ASP).
    const float fraction = options_.per_sample_updates && weight > 0.0f ? weight : 1.0f;
    const FractionalStep step = StepForFraction(SgdFor(held), fraction);
    held.state.Apply(step.options, step.grad_scale, grad);
    held.steps += fraction;
  }
  if (options_.sync == proto::BSP) {
    ++held.pushed[w];
  } else {
    held.pushed[w] = std::max(held.pushed[w] + 1, header.clock() + 1);
  }
  responder.ReplyStatus(absl::OkStatus());
  MaybeCompleteClock(held);
  ReleaseParkedPulls(held);
  return absl::OkStatus();
}

void ServerHandler::MaybeCompleteClock(HeldPartition& held) {
  if (held.aggregator == nullptr) return;
  if (hold_after_.has_value() && held.aggregator->clock() > *hold_after_) return;  // a join
  if (held.aggregator->Complete(live_workers_, joined_at_)) {
    held.state.Apply(SgdFor(held), held.aggregator->scale(), held.aggregator->sum());
    held.steps += 1;
    held.aggregator->Advance();
  }
}

bool ServerHandler::PullReady(const HeldPartition& held, int64_t min_version,
                              int64_t min_clock) const {
  if (!held.state.initialized() || held.state.version() < min_version) return false;
  if (min_clock > 0) {
    for (int w = 0; w < num_workers_; ++w) {
      if (live_workers_[w] && held.pushed[w] < min_clock) return false;
    }
  }
  return true;
}

absl::Status ServerHandler::HandlePull(Message& request, Responder& responder) {
  const proto::Header& header = request.header;
  R2SP_ASSIGN_OR_RETURN(HeldPartition* const found, FindPartition(header, responder));
  HeldPartition& held = *found;
  if (!request.payload.empty()) return absl::InvalidArgumentError("PULL carries no payload");
  const proto::PullInfo& info = header.pull();
  if (info.predict_fraction() != 0.0f || info.predict_updates() != 0) {
    if (options_.sync == proto::BSP) {
      return absl::InvalidArgumentError("predicted pulls are for asynchronous modes, not bsp");
    }
    if (!(info.predict_fraction() > 0.0f && info.predict_fraction() <= 1.0f) ||
        info.predict_updates() < 1 || info.predict_updates() > kMaxPredictedUpdates) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a predicted pull needs a fraction in (0, 1] and 1 to ", kMaxPredictedUpdates,
          " updates, got ", info.predict_fraction(), " and ", info.predict_updates()));
    }
  }
  if (header.codec() != proto::FP32 && header.codec() != proto::FP16 &&
      header.codec() != proto::FP16_DELTA) {
    return absl::InvalidArgumentError(
        absl::StrCat("PULL: unknown codec ", static_cast<int>(header.codec())));
  }
  if (info.delta_base() != 0 && header.codec() != proto::FP16_DELTA) {
    return absl::InvalidArgumentError("PULL: a delta_base is for FP16_DELTA pulls only");
  }
  ParkedPull pull{info.min_version(), info.min_clock(), info.predict_fraction(),
                  info.predict_updates(), header.codec(), header.sender_rank(),
                  info.delta_base(), absl::Time(), std::move(responder)};
  if (PullReady(held, pull.min_version, pull.min_clock)) {
    AnswerPull(held, pull, 0.0);
    return absl::OkStatus();
  }
  // A worker parks at most kMaxParkedPulls pulls per partition (it needs one), so a peer can
  // park no more here than that many per partition held.
  int parked = 0;
  for (const ParkedPull& p : held.parked_pulls) parked += p.rank == pull.rank;
  if (parked >= kMaxParkedPulls) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", pull.rank, " has ", parked, " pulls of partition ", header.key(),
        " waiting already"));
  }
  pull.since = clock_();
  held.parked_pulls.push_back(std::move(pull));
  return absl::OkStatus();
}

void ServerHandler::AnswerPull(HeldPartition& held, ParkedPull& pull, double waited) {
  Message reply;
  reply.header.set_clock(held.state.version());
  if (waited > 0) reply.header.mutable_pull_reply()->set_waited_seconds(waited);
  if (held.steps > 0) reply.header.mutable_pull_reply()->set_steps(held.steps);
  if (held.restored_steps > 0) {
    reply.header.mutable_pull_reply()->set_restored_steps(held.restored_steps);
  }
  zmq::message_t frame;
  proto::Codec codec = proto::FP32;
  if (pull.predict_updates > 0) {
    // The updates to come carry the fraction between them (or are whole steps each).
    const float each = options_.per_sample_updates
                           ? pull.predict_fraction / static_cast<float>(pull.predict_updates)
                           : 1.0f;
    frame = held.state.PredictedPullFrame(PredictionFor(SgdFor(held), each, pull.predict_updates));
  } else if (pull.codec == proto::FP16) {
    frame = held.state.Fp16PullFrame();  // encoded once per version
    codec = proto::FP16;
  } else {
    frame = held.state.PullFrame();
  }
  if (pull.codec == proto::FP16_DELTA) {
    if (held.shadows == nullptr) {
      held.shadows = std::make_unique<PullShadows>(held.state.num_elements(), num_workers_);
    }
    PullShadows::Reply delta = held.shadows->Answer(pull.rank, pull.delta_base, std::move(frame));
    frame = std::move(delta.frame);
    codec = delta.codec;
    reply.header.mutable_pull_reply()->set_delta_seq(delta.seq);
  } else if (pull.codec == proto::FP16 && codec != proto::FP16) {
    frame = Fp16Frame(frame);  // predicted weights, for this pull alone
    codec = proto::FP16;
  }
  if (codec != proto::FP32) reply.header.set_codec(codec);
  reply.payload.push_back(std::move(frame));
  counters_.bytes_pulled += reply.payload[0].size();
  ++counters_.pulls;
  pull.responder.Reply(std::move(reply));
}

void ServerHandler::ReleaseParkedPulls(HeldPartition& held) {
  if (held.parked_pulls.empty() || !held.state.initialized()) return;
  std::vector<ParkedPull> still_waiting;
  const absl::Time now = clock_();
  for (ParkedPull& pull : held.parked_pulls) {
    if (PullReady(held, pull.min_version, pull.min_clock)) {
      AnswerPull(held, pull, absl::ToDoubleSeconds(now - pull.since));
    } else {
      still_waiting.push_back(std::move(pull));
    }
  }
  held.parked_pulls = std::move(still_waiting);
}

}  // namespace r2sp
