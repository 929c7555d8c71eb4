// See scheduler_core.h.
#include "scheduler/scheduler_core.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/leave_request.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "scheduler/job_report.h"
#include "scheduler/membership_settings.h"

namespace r2sp {
namespace {

// A request to a server from the scheduler.
Message ToServer(proto::MsgType type) {
  Message request;
  request.header.set_type(type);
  request.header.set_sender_role(proto::SCHEDULER);
  return request;
}

}  // namespace

SchedulerCore::SchedulerCore(const SchedulerOptions& options, Requester* requester, Clock clock)
    : options_(options),
      requester_(requester),
      clock_(std::move(clock)),
      started_(clock_()),
      failure_detector_(options.heartbeat_timeout, options.progress_timeout),
      slots_(options.slots, options.sync == proto::R2SP),
      epoch_plans_(options.num_workers),
      membership_(MembershipOptionsFor(options), &nodes_, &slots_, &barriers_, requester) {
  const absl::Status valid = options.Validate();  // REQUIRES: valid options
  CHECK(valid.ok()) << valid;
  if (options.restored_epoch_plans.plans_size() > 0) {
    epoch_plans_.Restore(options.restored_epoch_plans);
  }
}

std::string SchedulerCore::failure() const {
  absl::MutexLock lock(&mu_);
  return failure_;
}

std::string SchedulerCore::ReportJson() const {
  absl::MutexLock lock(&mu_);
  return JobReportJson(
      JobReport{options_.sync, failure_, refusals_.count(), metrics_.Json(slots_.stats())}, nodes_,
      slots_);
}

absl::Time SchedulerCore::NextWakeup() {
  absl::MutexLock lock(&mu_);
  return slots_.NextWakeup();
}

void SchedulerCore::Fail(const std::string& why) {
  LOG(ERROR) << "job failed: " << why;
  if (failure_.empty()) failure_ = why;
  if (!done_.HasBeenNotified()) done_.Notify();
}

void SchedulerCore::HandleRequest(Message request, Responder responder) {
  const absl::Time now = clock_();
  {
    absl::MutexLock lock(&mu_);
    const absl::Status status =
        request.header.type() == proto::REGISTER
            ? membership_.Register(request.header, responder, now, shutting_down_, failure_)
            : HandleFromNode(request, responder, now);
    if (request.header.type() == proto::REGISTER) {
      metrics_.Registered(now, membership_.rendezvous_done());
    }
    if (absl::IsPermissionDenied(status)) {
      refusals_.Refuse(responder, status, now);
    } else if (!status.ok()) {
      responder.ReplyStatus(status);
    }
  }
  SendQueuedRequests();
}

absl::Status SchedulerCore::HandleFromNode(const Message& request, Responder& responder,
                                           absl::Time now) {
  const proto::Header& header = request.header;
  absl::StatusOr<Node*> sender = membership_.rendezvous_done()
                                     ? nodes_.Sender(header, responder)
                                     : absl::UnavailableError("registration is still in progress");
  if (absl::IsPermissionDenied(sender.status())) return sender.status();
  if (sender.ok() && header.type() == proto::HEARTBEAT) {
    return HandleHeartbeat(request, **sender, responder, now);  // the dead hear that they are
  }
  if (sender.ok() && (*sender)->state == NodeState::kDead) {
    sender = absl::FailedPreconditionError(
        absl::StrCat(RoleName((*sender)->role), " ", (*sender)->rank, " was declared dead"));
  }
  if (!sender.ok()) {
    LOG(WARNING) << "rejected " << proto::MsgType_Name(header.type()) << ": " << sender.status();
    return sender.status();
  }
  Node& node = **sender;
  node.last_seen = now;
  if (node.role == proto::WORKER && membership_.joins().IsJoining(node.rank)) {
    // Not a member yet: the batch tuner, the slot ring and the barriers do not have it.
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", node.rank, " is still joining; wait for the REGISTER reply"));
  }
  const NodeHandler handler = HandlerFor(header.type());
  if (handler == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("the scheduler does not handle ", proto::MsgType_Name(header.type())));
  }
  return (this->*handler)(request, node, responder, now);
}

SchedulerCore::NodeHandler SchedulerCore::HandlerFor(proto::MsgType type) {
  switch (type) {
    case proto::BARRIER:
      return &SchedulerCore::HandleBarrier;
    case proto::FINISH:
      return &SchedulerCore::HandleFinish;
    case proto::SLOT:
      return &SchedulerCore::HandleSlot;
    case proto::RELEASE:
      return &SchedulerCore::HandleRelease;
    case proto::EPOCH_PLAN:
      return &SchedulerCore::HandleEpochPlan;
    case proto::REPORT:
      return &SchedulerCore::HandleReport;
    case proto::LEAVE:
      return &SchedulerCore::HandleLeave;
    default:
      return nullptr;
  }
}

absl::Status SchedulerCore::HandleHeartbeat(const Message& request, Node& node,
                                            Responder& responder, absl::Time now) {
  Message reply;
  proto::HeartbeatReply* hb = reply.header.mutable_heartbeat_reply();
  if (node.state == NodeState::kDead) {
    // Not for a node that left (LEAVE): a heartbeat it sent beside its LEAVE would take the
    // leave for a verdict and stop it as lost before it hears the LEAVE's answer.
    hb->set_declared_dead(!node.left);
  } else {
    FailureDetector::Heard(node, request.header.heartbeat().progress(), now);
    metrics_.Heartbeat(now);
    nodes_.AddWorkerNews(request.header.heartbeat().news_seen(), *hb);
    membership_.replacement().AddNews(*hb);
    hb->set_shutting_down(shutting_down_);
    if (!failure_.empty()) hb->set_job_failed(failure_);
  }
  responder.Reply(std::move(reply));
  return absl::OkStatus();
}

absl::Status SchedulerCore::HandleBarrier(const Message& request, Node& node, Responder& responder,
                                          absl::Time now) {
  R2SP_RETURN_IF_ERROR(barriers_.Arrive(request.header, node.id(), responder));
  ReleaseBarriers(now);
  return absl::OkStatus();
}

absl::Status SchedulerCore::HandleFinish(const Message& request, Node& node, Responder& responder,
                                         absl::Time now) {
  if (node.role != proto::WORKER) return absl::InvalidArgumentError("only workers send FINISH");
  node.counters = request.header.counters();
  if (node.state == NodeState::kAlive) {
    nodes_.SetState(node, NodeState::kFinished);
    WorkerLeft(node, now);
  }
  LOG(INFO) << "worker " << node.rank << " finished after " << node.counters.iterations()
            << " iterations";
  responder.ReplyStatus(absl::OkStatus());
  ReleaseBarriers(now);
  MaybeEndJob();
  return absl::OkStatus();
}

absl::Status SchedulerCore::HandleSlot(const Message& request, Node& node, Responder& responder,
                                       absl::Time now) {
  if (node.role != proto::WORKER) {
    return absl::FailedPreconditionError("SLOT needs a worker and a job with --sync=r2sp");
  }
  slots_.RequestSlot(node.rank, request.header.report(), std::move(responder), now);
  return absl::OkStatus();
}

absl::Status SchedulerCore::HandleRelease(const Message& request, Node& node, Responder& responder,
                                          absl::Time now) {
  if (node.role != proto::WORKER) return absl::InvalidArgumentError("only workers hold slots");
  R2SP_RETURN_IF_ERROR(slots_.Release(node.rank, request.header.report().leaving(), now));
  responder.ReplyStatus(absl::OkStatus());
  return absl::OkStatus();
}

absl::Status SchedulerCore::HandleReport(const Message& request, Node& node, Responder& responder,
                                         absl::Time /*now*/) {
  if (node.role != proto::WORKER) {
    return absl::FailedPreconditionError("REPORT needs a worker and a job with --hetero_batching");
  }
  Message reply;
  R2SP_ASSIGN_OR_RETURN(*reply.header.mutable_batch(),
                        slots_.Report(node.rank, request.header.report()));
  responder.Reply(std::move(reply));
  return absl::OkStatus();
}

absl::Status SchedulerCore::HandleEpochPlan(const Message& request, Node& node,
                                            Responder& responder, absl::Time /*now*/) {
  if (node.role != proto::WORKER || !options_.absorb_orphaned_shards) {
    return absl::FailedPreconditionError(
        "EPOCH_PLAN needs a worker and a scheduler with --absorb_orphaned_shards");
  }
  const proto::EpochPlanRequest& ask = request.header.epoch_plan_request();
  const int planned = epoch_plans_.plans().plans_size();
  bool fixed = false;
  R2SP_ASSIGN_OR_RETURN(proto::EpochPlan plan, epoch_plans_.Plan(ask.epoch(), ask.starting(),
                                                                 nodes_.LiveShards(), &fixed));
  if (epoch_plans_.plans().plans_size() > planned) {  // a new epoch was planned
    if (plan.live_shards_size() < options_.num_workers) {
      LOG(INFO) << "epoch " << ask.epoch() + 1 << ": the dead workers' data shards are dealt "
                << "out among the live shards " << absl::StrJoin(plan.live_shards(), ", ");
    }
    membership_.joins().ShardsDealtOut();  // the plan counts every shard with a live worker
  }
  if (fixed && options_.save_epoch_plans) options_.save_epoch_plans(epoch_plans_.plans());
  Message reply;
  *reply.header.mutable_epoch_plan() = std::move(plan);
  responder.Reply(std::move(reply));
  return absl::OkStatus();
}

absl::Status SchedulerCore::HandleLeave(const Message& request, Node& node, Responder& responder,
                                        absl::Time now) {
  if (node.role != proto::WORKER) return absl::InvalidArgumentError("only workers send LEAVE");
  R2SP_ASSIGN_OR_RETURN(const proto::LeaveRequest leave, DecodeLeaveRequest(request.header));
  responder.ReplyStatus(absl::OkStatus());
  if (node.state != NodeState::kAlive) return absl::OkStatus();  // it finished already
  node.counters = leave.counters();
  nodes_.SetState(node, NodeState::kDead);
  node.left = true;
  LOG(WARNING) << "worker " << node.rank << " at " << node.endpoint << " left the job ("
               << leave.reason() << ") after " << node.counters.iterations() << " iterations";
  WorkerDied(node, now, now);  // removed as its LEAVE arrived
  // The others may have been waiting for it: their progress clocks start again.
  FailureDetector::RestartProgressClocks(nodes_, now);
  ReleaseBarriers(now);
  MaybeEndJob();
  return absl::OkStatus();
}

void SchedulerCore::WorkerLeft(const Node& node, absl::Time now) {
  slots_.WorkerLeft(node.rank, now);
}

void SchedulerCore::WorkerDied(const Node& node, absl::Time last_seen, absl::Time now) {
  WorkerLeft(node, now);
  metrics_.WorkerRemoved(node.rank, last_seen, now);
  if (node.data_shard >= 0) membership_.joins().ShardOrphaned(node.data_shard);
}

void SchedulerCore::ReleaseBarriers(absl::Time started) {
  const int answered = barriers_.Release(nodes_.Live());
  if (answered > 0) metrics_.BarrierReleased(started, clock_(), answered);
}

bool SchedulerCore::DetectFailures(absl::Time now) {
  const std::vector<FailureDetector::Death> deaths = failure_detector_.Detect(
      nodes_, now, [this](const Node& n) { return membership_.joins().IsJoining(n.rank); },
      [this](const Node& n) { return slots_.IsWaiting(n.rank) || barriers_.IsWaiting(n.id()); });
  for (const FailureDetector::Death& death : deaths) {
    Node& n = *death.node;
    if (n.role == proto::WORKER) {
      WorkerDied(n, n.last_seen, now);
    } else if (!shutting_down_) {
      const absl::Status lost = membership_.replacement().Lost(n, death.why, now);
      if (!lost.ok()) {
        Fail(std::string(lost.message()));
      } else {
        // Requests owed by the lost server fail now (a join's prepare is cancelled, not left
        // to time out), and the connection to it closes instead of reconnecting for the rest
        // of the job: a replacement is reached over a new one.
        requester_->ResetPeer(n.endpoint, "the server was lost");
      }
    }
  }
  const absl::StatusOr<bool> awaiting = membership_.replacement().Awaiting(now, shutting_down_);
  if (!awaiting.ok()) Fail(std::string(awaiting.status().message()));
  if ((awaiting.ok() && *awaiting) || !deaths.empty()) {
    // The others may have been waiting for the dead one, or wait for a lost server's
    // replacement: their progress clocks start again.
    FailureDetector::RestartProgressClocks(nodes_, now);
  }
  return !deaths.empty();
}

void SchedulerCore::MaybeEndJob() {
  if (shutting_down_ || !membership_.rendezvous_done() || nodes_.AnyWorkerAlive()) return;
  shutting_down_ = true;
  if (!nodes_.AnyWorkerFinished() && failure_.empty()) {
    failure_ = "every worker died; none finished training";
    LOG(ERROR) << "job failed: " << failure_;
  }
  LOG(INFO) << "every worker has finished or died; shutting the servers down";
  for (const Node& s : nodes_.servers()) {
    if (s.state != NodeState::kAlive) continue;
    shutdowns_to_send_.emplace_back(s.rank, s.endpoint);
    ++shutdown_acks_outstanding_;
  }
  if (shutdown_acks_outstanding_ == 0 && !done_.HasBeenNotified()) done_.Notify();
}

void SchedulerCore::SendQueuedRequests() {
  std::vector<std::pair<int, std::string>> shutdowns;
  std::vector<MembershipNote> notes;
  {
    absl::MutexLock lock(&mu_);
    shutdowns.swap(shutdowns_to_send_);
    notes = membership_.joins().TakeMemberships();
  }
  for (MembershipNote& note : notes) {
    Message request = ToServer(proto::MEMBERSHIP);
    *request.header.mutable_membership() = std::move(note.membership);
    const int rank = note.rank;
    requester_->Request(
        note.endpoint, std::move(request), options_.shutdown_timeout,
        [this, rank](absl::StatusOr<Message> reply) { ServerKnowsJoin(rank, std::move(reply)); });
  }
  for (auto& [rank, endpoint] : shutdowns) {
    Message request = ToServer(proto::SHUTDOWN);
    request.header.set_sender_rank(0);
    const int r = rank;
    requester_->Request(
        endpoint, std::move(request), options_.shutdown_timeout,
        [this, r](absl::StatusOr<Message> reply) { ServerAcknowledged(r, std::move(reply)); });
  }
}

void SchedulerCore::ServerKnowsJoin(int rank, absl::StatusOr<Message> reply) {
  const absl::Time now = clock_();
  {
    absl::MutexLock lock(&mu_);
    membership_.ServerAnswered(rank, reply, now);
  }
  SendQueuedRequests();  // the commit or the cancel
}

void SchedulerCore::ServerAcknowledged(int rank, absl::StatusOr<Message> reply) {
  absl::MutexLock lock(&mu_);
  Node& server = nodes_.servers()[rank];
  if (reply.ok() && reply->header.code() == proto::OK) {
    server.counters = reply->header.counters();
    nodes_.SetState(server, NodeState::kFinished);
  } else {
    LOG(WARNING) << "server " << rank << " did not acknowledge SHUTDOWN: "
                 << (reply.ok() ? reply->header.error() : reply.status().ToString());
  }
  if (--shutdown_acks_outstanding_ == 0 && !done_.HasBeenNotified()) done_.Notify();
}

void SchedulerCore::OnTick(absl::Time now) {
  {
    absl::MutexLock lock(&mu_);
    // Ticks come every 50 ms or sooner; a longer pause is the scheduler's, not the nodes'.
    if (last_tick_ != absl::InfinitePast() && now - last_tick_ > options_.stall_forgiven_after) {
      FailureDetector::Forgive(nodes_, now - last_tick_);
    }
    last_tick_ = now;
    if (!membership_.rendezvous_done()) {
      if (now - started_ > options_.register_timeout && !done_.HasBeenNotified()) {
        const std::string why = absl::StrCat("not every node registered within ",
                                             absl::FormatDuration(options_.register_timeout));
        membership_.FailRendezvous(why);
        Fail(why);
      }
      return;
    }
    if (DetectFailures(now)) {
      ReleaseBarriers(now);
      MaybeEndJob();
    }
    membership_.AdmitWaiting(now, shutting_down_, failure_);
    slots_.GrantDue(now);
  }
  SendQueuedRequests();
}

}  // namespace r2sp
