// See scheduler_core.h.
#include "scheduler/scheduler_core.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace r2sp {
namespace {

SlotCoordinatorOptions SlotOptionsFrom(const SchedulerOptions& options) {
  SlotCoordinatorOptions slots;
  slots.r2sp = options.sync == proto::R2SP;
  slots.headroom = options.r2sp_headroom;
  slots.order = options.r2sp_order;
  slots.width = options.r2sp_slot_width;
  slots.hetero_batching = options.hetero_batching;
  slots.batching = options.batching;
  return slots;
}

}  // namespace

const char* SchedulerCore::RoleName(proto::Role role) {
  switch (role) {
    case proto::SERVER:
      return "server";
    case proto::WORKER:
      return "worker";
    default:
      return "node";
  }
}

SchedulerCore::SchedulerCore(const SchedulerOptions& options, Requester* requester,
                             Clock clock)
    : options_(options),
      requester_(requester),
      clock_(std::move(clock)),
      started_(clock_()),
      slots_(SlotOptionsFrom(options)),
      epoch_plans_(options.num_workers) {
  CHECK(options.Validate().ok()) << options.Validate();  // REQUIRES: valid options
  if (options.restored_epoch_plans.plans_size() > 0) {
    epoch_plans_.Restore(options.restored_epoch_plans);
  }
}

std::string SchedulerCore::failure() const {
  absl::MutexLock lock(&mu_);
  return failure_;
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
    const proto::Header& header = request.header;
    if (header.type() == proto::REGISTER) {
      HandleRegister(request, responder, now);
    } else {
      HandleFromNode(request, responder, now);
    }
  }
  SendQueuedRequests();
}

void SchedulerCore::HandleFromNode(const Message& request, Responder& responder, absl::Time now) {
  const proto::Header& header = request.header;
  absl::StatusOr<Node*> sender = Sender(header, responder);
  if (absl::IsPermissionDenied(sender.status())) {
    Deny(responder, std::string(sender.status().message()));
    return;
  }
  if (sender.ok() && header.type() == proto::HEARTBEAT) {
    HandleHeartbeat(request, **sender, responder, now);  // the dead hear that they are
    return;
  }
  if (sender.ok() && (*sender)->state == NodeState::kDead) {
    sender = absl::FailedPreconditionError(
        absl::StrCat(RoleName((*sender)->role), " ", (*sender)->rank, " was declared dead"));
  }
  if (!sender.ok()) {
    LOG(WARNING) << "rejected " << proto::MsgType_Name(header.type()) << ": "
                 << sender.status();
    responder.ReplyStatus(sender.status());
    return;
  }
  Node& node = **sender;
  node.last_seen = now;
  if (node.role == proto::WORKER && pending_joins_.contains(node.rank)) {
    // Not a member yet: the batch tuner, the slot ring and the barriers do not have it.
    responder.ReplyStatus(absl::FailedPreconditionError(absl::StrCat(
        "worker ", node.rank, " is still joining; wait for the REGISTER reply")));
    return;
  }
  switch (header.type()) {
    case proto::BARRIER:
      HandleBarrier(request, node, responder);
      break;
    case proto::FINISH:
      if (node.role != proto::WORKER) {
        responder.ReplyStatus(absl::InvalidArgumentError("only workers send FINISH"));
        break;
      }
      node.counters = header.counters();
      if (node.state == NodeState::kAlive) {
        node.state = NodeState::kFinished;
        WorkerLeft(node, now);
      }
      LOG(INFO) << "worker " << node.rank << " finished after "
                << node.counters.iterations() << " iterations";
      responder.ReplyStatus(absl::OkStatus());
      ReleaseBarriers();
      MaybeEndJob();
      break;
    case proto::SLOT:
      if (node.role != proto::WORKER) {
        responder.ReplyStatus(
            absl::FailedPreconditionError("SLOT needs a worker and a job with --sync=r2sp"));
        break;
      }
      slots_.RequestSlot(node.rank, header.report(), std::move(responder), now);
      break;
    case proto::RELEASE:
      if (node.role != proto::WORKER) {
        responder.ReplyStatus(absl::InvalidArgumentError("only workers hold slots"));
        break;
      }
      responder.ReplyStatus(slots_.Release(node.rank, header.report().leaving(), now));
      break;
    case proto::EPOCH_PLAN:
      HandleEpochPlan(request, node, responder);
      break;
    case proto::REPORT: {
      absl::StatusOr<proto::BatchAssignment> batch =
          node.role == proto::WORKER
              ? slots_.Report(node.rank, header.report())
              : absl::FailedPreconditionError(
                    "REPORT needs a worker and a job with --hetero_batching");
      if (!batch.ok()) {
        responder.ReplyStatus(batch.status());
        break;
      }
      Message reply;
      *reply.header.mutable_batch() = *batch;
      responder.Reply(std::move(reply));
      break;
    }
    default:
      responder.ReplyStatus(absl::InvalidArgumentError(absl::StrCat(
          "the scheduler does not handle ", proto::MsgType_Name(header.type()))));
  }
}

void SchedulerCore::WorkerLeft(const Node& node, absl::Time now) {
  slots_.WorkerLeft(node.rank, now);
}

absl::Time SchedulerCore::NextWakeup() {
  absl::MutexLock lock(&mu_);
  return slots_.NextWakeup();
}

void SchedulerCore::Deny(Responder& responder, const std::string& why) {
  ++denied_requests_;
  int64_t suppressed = 0;
  if (deny_log_.ShouldLog(clock_(), &suppressed)) {
    LOG(WARNING) << "denied a request: " << why << " (" << suppressed
                 << " more denied since the last report)";
  }
  responder.ReplyStatus(absl::PermissionDeniedError(why));
}

absl::StatusOr<SchedulerCore::Node*> SchedulerCore::Sender(const proto::Header& header,
                                                           const Responder& responder) {
  if (!rendezvous_done_) {
    return absl::UnavailableError("registration is still in progress");
  }
  if (!responder.MayBe(header.sender_role())) {
    return absl::PermissionDeniedError(
        absl::StrCat("the sender's key is not a ", RoleName(header.sender_role()), "'s"));
  }
  std::deque<Node>* nodes = header.sender_role() == proto::SERVER   ? &servers_
                             : header.sender_role() == proto::WORKER ? &workers_
                                                                     : nullptr;
  if (nodes == nullptr || header.sender_rank() < 0 ||
      header.sender_rank() >= static_cast<int>(nodes->size())) {
    return absl::InvalidArgumentError(absl::StrCat("unknown sender ",
                                                   proto::Role_Name(header.sender_role()), " ",
                                                   header.sender_rank()));
  }
  Node* node = &(*nodes)[header.sender_rank()];
  if (node->routing_id != responder.routing_id()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the request did not come over ", RoleName(node->role), " ", node->rank,
        "'s connection"));
  }
  return node;
}

void SchedulerCore::MaybeEndJob() {
  if (shutting_down_ || !rendezvous_done_) return;
  for (const Node& w : workers_) {
    if (w.state == NodeState::kAlive) return;
  }
  shutting_down_ = true;
  bool any_finished = false;
  for (const Node& w : workers_) any_finished |= w.state == NodeState::kFinished;
  if (!any_finished && failure_.empty()) {
    failure_ = "every worker died; none finished training";
    LOG(ERROR) << "job failed: " << failure_;
  }
  LOG(INFO) << "every worker has finished or died; shutting the servers down";
  for (const Node& s : servers_) {
    if (s.state != NodeState::kAlive) continue;
    shutdowns_to_send_.emplace_back(s.rank, s.endpoint);
    ++shutdown_acks_outstanding_;
  }
  if (shutdown_acks_outstanding_ == 0 && !done_.HasBeenNotified()) done_.Notify();
}

void SchedulerCore::SendQueuedRequests() {
  std::vector<std::pair<int, std::string>> to_send;
  std::vector<MembershipNote> notes;
  {
    absl::MutexLock lock(&mu_);
    to_send.swap(shutdowns_to_send_);
    notes.swap(memberships_to_send_);
  }
  for (MembershipNote& note : notes) {
    Message request;
    request.header.set_type(proto::MEMBERSHIP);
    request.header.set_sender_role(proto::SCHEDULER);
    *request.header.mutable_membership() = std::move(note.membership);
    const int rank = note.rank;
    requester_->Request(note.endpoint, std::move(request), options_.shutdown_timeout,
                        [this, rank](absl::StatusOr<Message> reply) {
                          ServerKnowsJoin(rank, std::move(reply));
                        });
  }
  for (auto& [rank, endpoint] : to_send) {
    Message request;
    request.header.set_type(proto::SHUTDOWN);
    request.header.set_sender_role(proto::SCHEDULER);
    request.header.set_sender_rank(0);
    const int r = rank;
    requester_->Request(endpoint, std::move(request), options_.shutdown_timeout,
                        [this, r](absl::StatusOr<Message> reply) {
                          ServerAcknowledged(r, std::move(reply));
                        });
  }
}

void SchedulerCore::ServerAcknowledged(int rank, absl::StatusOr<Message> reply) {
  absl::MutexLock lock(&mu_);
  Node& server = servers_[rank];
  if (reply.ok() && reply->header.code() == proto::OK) {
    server.counters = reply->header.counters();
    server.state = NodeState::kFinished;
  } else {
    LOG(WARNING) << "server " << rank << " did not acknowledge SHUTDOWN: "
                 << (reply.ok() ? reply->header.error() : reply.status().ToString());
  }
  if (--shutdown_acks_outstanding_ == 0 && !done_.HasBeenNotified()) done_.Notify();
}

void SchedulerCore::OnTick(absl::Time now) {
  {
    absl::MutexLock lock(&mu_);
    if (!rendezvous_done_) {
      if (now - started_ > options_.register_timeout && !done_.HasBeenNotified()) {
        const std::string why = absl::StrCat(
            "not every node registered within ", absl::FormatDuration(options_.register_timeout));
        for (PendingRegister& p : pending_) {
          p.responder.ReplyStatus(absl::FailedPreconditionError(why));
        }
        pending_.clear();
        Fail(why);
      }
      return;
    }
    if (DetectFailures(now)) {
      ReleaseBarriers();
      MaybeEndJob();
    }
    AdmitWaitingJoins(now);
    AdmitWaitingServers(now);
    slots_.GrantDue(now);
  }
  SendQueuedRequests();
}

}  // namespace r2sp
