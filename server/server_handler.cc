// See server_handler.h.
#include "server/server_handler.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/sync_modes.h"
#include "common/wire/pull_frames.h"
#include "glog/logging.h"
#include "server/shard_checkpoint.h"

namespace r2sp {
namespace {

// Before any member is built from them (a thread pool of apply_threads).
const ServerOptions& Checked(const ServerOptions& options) {
  const absl::Status valid = options.Validate();
  CHECK(valid.ok()) << "ServerHandler needs valid options: " << valid;
  return options;
}

}  // namespace

ServerHandler::ServerHandler(const ServerOptions& options, Clock clock)
    : options_(Checked(options)),
      clock_(std::move(clock)),
      pool_(options.apply_threads > 1 ? std::make_unique<RangePool>(options.apply_threads)
                                      : nullptr),
      replier_(options.sgd, options.schedule, options.per_sample_updates),
      roster_(options.sync) {}

void ServerHandler::Configure(int rank, const ServerPeers& peers, const ModelLayout& layout) {
  absl::MutexLock lock(&mu_);
  CHECK(!configured_) << "ServerHandler::Configure called twice";
  const int num_workers = static_cast<int>(peers.worker_ids.size());
  rank_ = rank;
  num_workers_ = num_workers;
  peers_ = peers;
  roster_.Reset(rank, num_workers);
  partitions_ = PartitionTable(layout, rank, num_workers, RoundSynchronous(options_.sync),
                               pool_.get());
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
  const HeldPartition* held = partitions_.Get(key);
  if (held == nullptr) return std::nullopt;
  const PartitionState& state = held->state;
  return std::vector<float>(state.weights(), state.weights() + state.num_elements());
}

void ServerHandler::HandleRequest(Message request, Responder responder) {
  using Handler = absl::Status (ServerHandler::*)(Message&, Responder&);
  struct Route {
    proto::MsgType type;
    Handler handle;
  };
  static constexpr Route kRoutes[] = {
      {proto::PUSH, &ServerHandler::HandlePush},
      {proto::PULL, &ServerHandler::HandlePull},
      {proto::OPTIMIZER_STATE, &ServerHandler::HandleOptimizerState},
      {proto::MEMBERSHIP, &ServerHandler::HandleMembership},
      {proto::SHUTDOWN, &ServerHandler::HandleShutdown},
  };
  absl::MutexLock lock(&mu_);
  absl::Status status = absl::InvalidArgumentError(
      absl::StrCat("a server does not handle ", proto::MsgType_Name(request.header.type())));
  for (const Route& route : kRoutes) {
    if (route.type == request.header.type()) status = (this->*route.handle)(request, responder);
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

absl::Status ServerHandler::HandleShutdown(Message& request, Responder& responder) {
  R2SP_RETURN_IF_ERROR(CheckScheduler(responder, "shut a server down"));
  Message reply;
  *reply.header.mutable_counters() = CountersLocked();
  responder.Reply(std::move(reply));
  if (!shutdown_requested_.HasBeenNotified()) shutdown_requested_.Notify();
  return absl::OkStatus();
}

SgdOptions ServerHandler::SgdFor(const HeldPartition& held) const {
  if (held.script_sgd) return *held.script_sgd;  // the script's rate, its own schedule
  return ScheduledSgd(options_.sgd, options_.schedule, held.steps);
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

absl::StatusOr<HeldPartition*> ServerHandler::FindPartition(const proto::Header& header,
                                                            const Responder& responder) {
  R2SP_RETURN_IF_ERROR(CheckSender(header, responder));
  if (header.has_to_server() && header.to_server() != rank_) {
    return absl::UnavailableError(absl::StrCat("a request for server ", header.to_server(),
                                               " reached server ", rank_));
  }
  return partitions_.Find(header.key());
}

absl::Status ServerHandler::HandlePull(Message& request, Responder& responder) {
  R2SP_ASSIGN_OR_RETURN(HeldPartition* const found, FindPartition(request.header, responder));
  HeldPartition& held = *found;
  R2SP_ASSIGN_OR_RETURN(wire::PullRequest wanted,
                        wire::DecodePull(request, !RoundSynchronous(options_.sync)));
  if (wanted.predict_updates > 0 && wanted.rank >= 0 &&
      wanted.rank < static_cast<int>(held.asked.size())) {
    held.asked[wanted.rank] = {wanted.predict_fraction, wanted.predict_updates};
  }
  ParkedPull pull{std::move(wanted), absl::Time(), std::move(responder)};
  if (PartitionTable::Ready(held, pull.request.min_version, pull.request.min_clock,
                            roster_.live())) {
    AnswerPull(held, pull, 0.0);
    return absl::OkStatus();
  }
  const absl::Status parked = PartitionTable::Park(held, pull, clock_);
  if (!parked.ok()) responder = std::move(pull.responder);  // HandleRequest rejects it
  return parked;
}

void ServerHandler::AnswerPull(HeldPartition& held, ParkedPull& pull, double waited) {
  Message reply = replier_.Build(held, pull.request, waited, num_workers_);
  counters_.bytes_pulled += reply.payload[0].size();
  ++counters_.pulls;
  pull.responder.Reply(std::move(reply));
}

void ServerHandler::ReleaseParkedPulls(HeldPartition& held) {
  PartitionTable::ReleaseReady(
      held, roster_.live(), clock_,
      [this](HeldPartition& h, ParkedPull& pull, double waited)
          ABSL_NO_THREAD_SAFETY_ANALYSIS { AnswerPull(h, pull, waited); });  // under mu_
}

void ServerHandler::Resume() {
  partitions_.ForEach([this](uint64_t, HeldPartition& held) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    MaybeCompleteClock(held);  // under mu_, as Resume
    ReleaseParkedPulls(held);
  });
  MaybeSnapshotAtSteps(nullptr);
}

void ServerHandler::MaybeSnapshotAtSteps(const HeldPartition* updated) {
  // Only the partition a request moved on can have been the last to reach the due steps.
  if (snapshot_every_ <= 0 || (updated != nullptr && updated->steps < snapshot_due_)) return;
  const double steps = partitions_.Steps();
  if (steps < snapshot_due_ || !partitions_.Initialized()) return;
  step_snapshot_ = SnapshotLocked();
  snapshot_due_ = steps + snapshot_every_;
}

absl::Status ServerHandler::HandleMembership(Message& request, Responder& responder) {
  R2SP_RETURN_IF_ERROR(CheckScheduler(responder, "change membership"));
  const proto::Membership& m = request.header.membership();
  if (m.prepare() && m.cancel()) {
    return absl::InvalidArgumentError("MEMBERSHIP: prepare and cancel exclude each other");
  }
  Message reply;
  if (m.prepare()) {
    R2SP_ASSIGN_OR_RETURN(const int64_t first, roster_.Prepare(partitions_));
    reply.header.set_clock(first);
  } else if (m.cancel()) {
    LOG(INFO) << "server " << rank_ << ": the join was cancelled";
    ReleaseHold();
  } else {
    R2SP_RETURN_IF_ERROR(GrowWorkers(m));
  }
  responder.Reply(std::move(reply));
  return absl::OkStatus();
}

absl::Status ServerHandler::GrowWorkers(const proto::Membership& membership) {
  R2SP_RETURN_IF_ERROR(roster_.CheckGrow(membership));
  const int num_workers = membership.num_workers();
  const int64_t join_clock = membership.join_clock();
  if (absl::Status fits = roster_.CheckJoinClock(join_clock, partitions_); !fits.ok()) {
    ReleaseHold();
    return fits;
  }
  roster_.Grow(num_workers, join_clock, partitions_);
  // Ranks keep their connections: a MEMBERSHIP can add workers, never rebind one.
  peers_.worker_ids.resize(num_workers_);
  for (int w = num_workers_; w < num_workers; ++w) {
    peers_.worker_ids.push_back(membership.worker_ids(w));
  }
  const bool at_clock = options_.sync == proto::SSP || RoundSynchronous(options_.sync);
  LOG(INFO) << "server " << rank_ << ": " << num_workers - num_workers_ << " worker(s) joined, "
            << num_workers << " in all"
            << (at_clock ? absl::StrCat(", from clock ", join_clock) : "");
  num_workers_ = num_workers;
  ReleaseHold();
  return absl::OkStatus();
}

void ServerHandler::ReleaseHold() {
  if (roster_.EndHold()) Resume();
}

void ServerHandler::SetDepartedWorkers(const std::vector<int>& departed) {
  absl::MutexLock lock(&mu_);
  if (roster_.Depart(departed)) Resume();
}

proto::ShardCheckpoint ServerHandler::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return SnapshotLocked();
}

bool ServerHandler::KeepsOwnMomentum() const {
  // Elastic modes keep no momentum on the servers (the workers run the optimizer).
  return options_.sgd.momentum > 0 && !Elastic(options_.sync);
}

proto::ShardCheckpoint ServerHandler::SnapshotLocked() const {
  return SnapshotShard(partitions_, KeepsOwnMomentum());
}

void ServerHandler::SnapshotAtSteps(double first, double every) {
  CHECK_GT(every, 0) << "SnapshotAtSteps needs a positive period";
  absl::MutexLock lock(&mu_);
  snapshot_due_ = first;
  snapshot_every_ = every;
  step_snapshot_.reset();
}

std::optional<proto::ShardCheckpoint> ServerHandler::TakeStepSnapshot(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const auto taken = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {  // under mu_, as Await
    return step_snapshot_.has_value();
  };
  mu_.AwaitWithTimeout(absl::Condition(&taken), timeout);
  std::optional<proto::ShardCheckpoint> shard = std::move(step_snapshot_);
  step_snapshot_.reset();
  return shard;
}

double ServerHandler::Steps() const {
  absl::MutexLock lock(&mu_);
  return partitions_.Steps();
}

bool ServerHandler::Initialized() const {
  absl::MutexLock lock(&mu_);
  return partitions_.Initialized();
}

absl::Status ServerHandler::Restore(const proto::ShardCheckpoint& shard) {
  absl::MutexLock lock(&mu_);
  CHECK(configured_) << "ServerHandler::Restore before Configure";
  R2SP_RETURN_IF_ERROR(RestoreShard(shard, partitions_));
  LOG(INFO) << "server " << rank_ << " restored " << partitions_.size() << " partitions";
  return absl::OkStatus();
}

}  // namespace r2sp
