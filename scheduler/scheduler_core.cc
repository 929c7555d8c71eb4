// See scheduler_core.h.
#include "scheduler/scheduler_core.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace r2sp {

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
      planner_(options.r2sp_headroom, /*smoothing=*/0.2, options.r2sp_order) {}

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
  SendQueuedShutdowns();
}

void SchedulerCore::HandleFromNode(const Message& request, Responder& responder, absl::Time now) {
  const proto::Header& header = request.header;
  absl::StatusOr<Node*> sender = Sender(header);
  if (!sender.ok()) {
    LOG(WARNING) << "rejected " << proto::MsgType_Name(header.type()) << ": "
                 << sender.status();
    responder.ReplyStatus(sender.status());
    return;
  }
  Node& node = **sender;
  node.last_seen = now;
  switch (header.type()) {
    case proto::HEARTBEAT: {
      Message reply;
      proto::HeartbeatReply* hb = reply.header.mutable_heartbeat_reply();
      for (const Node& w : workers_) {
        if (w.state == NodeState::kDead) hb->add_dead_workers(w.rank);
        if (w.state == NodeState::kFinished) hb->add_finished_workers(w.rank);
      }
      for (const Node& s : servers_) {
        if (s.state == NodeState::kDead) hb->add_dead_servers(s.rank);
      }
      hb->set_shutting_down(shutting_down_);
      responder.Reply(std::move(reply));
      break;
    }
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
      HandleSlot(request, node, responder, now);
      break;
    case proto::RELEASE: {
      absl::Status released = node.role == proto::WORKER
                                  ? planner_.Release(node.rank, now)
                                  : absl::InvalidArgumentError("only workers hold slots");
      if (released.ok() && header.report().leaving()) {
        planner_.Remove(node.rank);  // done training: the ring closes over it
        LOG(INFO) << "worker " << node.rank << " left the slot ring ("
                  << planner_.ring().size() << " left in it)";
      }
      responder.ReplyStatus(released);
      GrantSlots(now);
      break;
    }
    case proto::REPORT: {
      if (node.role != proto::WORKER || tuner_ == nullptr) {
        responder.ReplyStatus(absl::FailedPreconditionError(
            "REPORT needs a worker and a job with --hetero_batching"));
        break;
      }
      const proto::IterationReport& r = header.report();
      tuner_->Report(node.rank, r.samples(), r.compute_seconds(), r.comm_seconds(),
                     r.iterations_left());
      Message reply;
      *reply.header.mutable_batch() = Assignment(node.rank);
      responder.Reply(std::move(reply));
      break;
    }
    default:
      responder.ReplyStatus(absl::InvalidArgumentError(absl::StrCat(
          "the scheduler does not handle ", proto::MsgType_Name(header.type()))));
  }
}

void SchedulerCore::HandleSlot(const Message& request, Node& node, Responder& responder,
                               absl::Time now) {
  if (options_.sync != proto::R2SP || node.role != proto::WORKER) {
    responder.ReplyStatus(
        absl::FailedPreconditionError("SLOT needs a worker and a job with --sync=r2sp"));
    return;
  }
  const proto::IterationReport& r = request.header.report();
  absl::Status status = planner_.Request(node.rank, r.compute_seconds());
  if (!status.ok()) {
    responder.ReplyStatus(status);
    return;
  }
  if (tuner_ != nullptr) {
    tuner_->Report(node.rank, r.samples(), r.compute_seconds(), r.comm_seconds(),
                   r.iterations_left());
  }
  slot_waiters_.insert_or_assign(node.rank, std::move(responder));
  GrantSlots(now);
}

proto::BatchAssignment SchedulerCore::Assignment(int worker) const {
  proto::BatchAssignment a;
  a.set_batch_size(tuner_->batch(worker));
  a.set_throughput(tuner_->throughput(worker));
  return a;
}

void SchedulerCore::GrantSlots(absl::Time now) {
  while (std::optional<int> w = planner_.Poll(now)) {
    auto it = slot_waiters_.find(*w);
    if (it == slot_waiters_.end()) continue;  // cannot happen: Poll grants requesters only
    Message reply;
    proto::SlotGrant* grant = reply.header.mutable_slot_grant();
    grant->set_gap_seconds(absl::ToDoubleSeconds(planner_.gap()));
    grant->set_grant_index(planner_.grants() - 1);
    if (tuner_ != nullptr) *grant->mutable_batch() = Assignment(*w);
    it->second.Reply(std::move(reply));
    slot_waiters_.erase(it);
  }
}

void SchedulerCore::WorkerLeft(const Node& node, absl::Time now) {
  planner_.Remove(node.rank);
  slot_waiters_.erase(node.rank);
  if (tuner_ != nullptr) tuner_->Remove(node.rank);
  GrantSlots(now);
}

absl::Time SchedulerCore::NextWakeup() {
  absl::MutexLock lock(&mu_);
  return planner_.NextWakeup();
}

absl::StatusOr<SchedulerCore::Node*> SchedulerCore::Sender(const proto::Header& header) {
  if (!rendezvous_done_) {
    return absl::UnavailableError("registration is still in progress");
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
  Node& node = (*nodes)[header.sender_rank()];
  if (node.state == NodeState::kDead) {
    return absl::FailedPreconditionError(
        absl::StrCat(RoleName(node.role), " ", node.rank, " was declared dead"));
  }
  return &node;
}

bool SchedulerCore::InGroup(const Node& node, proto::Group group) const {
  switch (group) {
    case proto::ALL:
      return true;
    case proto::WORKERS:
      return node.role == proto::WORKER;
    case proto::SERVERS:
      return node.role == proto::SERVER;
    default:
      return false;
  }
}

void SchedulerCore::HandleBarrier(const Message& request, Node& node, Responder& responder) {
  const proto::BarrierRequest& req = request.header.barrier();
  if (!request.header.has_barrier() || !InGroup(node, req.group())) {
    responder.ReplyStatus(absl::InvalidArgumentError("BARRIER for a group the sender is not in"));
    return;
  }
  BarrierState& barrier = barriers_[req.group()];
  if (req.barrier_id() != barrier.id) {
    responder.ReplyStatus(absl::InvalidArgumentError(absl::StrCat(
        "barrier ", req.barrier_id(), " of group ", proto::Group_Name(req.group()),
        " but the group is at barrier ", barrier.id)));
    return;
  }
  for (Node* n : barrier.arrived) {
    if (n == &node) {
      responder.ReplyStatus(absl::AlreadyExistsError("already waiting at this barrier"));
      return;
    }
  }
  barrier.arrived.push_back(&node);
  barrier.waiting.push_back(std::move(responder));
  ReleaseBarriers();
}

void SchedulerCore::ReleaseBarriers() {
  for (auto& [group, barrier] : barriers_) {
    if (barrier.waiting.empty()) continue;
    bool complete = true;
    for (std::deque<Node>* nodes : {&servers_, &workers_}) {
      for (Node& n : *nodes) {
        if (n.state != NodeState::kAlive || !InGroup(n, static_cast<proto::Group>(group))) {
          continue;
        }
        bool arrived = false;
        for (Node* a : barrier.arrived) arrived |= a == &n;
        complete &= arrived;
      }
    }
    if (!complete) continue;
    for (Responder& r : barrier.waiting) r.ReplyStatus(absl::OkStatus());
    barrier.waiting.clear();
    barrier.arrived.clear();
    ++barrier.id;
  }
}

void SchedulerCore::MaybeEndJob() {
  if (shutting_down_ || !rendezvous_done_) return;
  for (const Node& w : workers_) {
    if (w.state == NodeState::kAlive) return;
  }
  shutting_down_ = true;
  LOG(INFO) << "every worker has finished or died; shutting the servers down";
  for (const Node& s : servers_) {
    if (s.state != NodeState::kAlive) continue;
    shutdowns_to_send_.emplace_back(s.rank, s.endpoint);
    ++shutdown_acks_outstanding_;
  }
  if (shutdown_acks_outstanding_ == 0 && !done_.HasBeenNotified()) done_.Notify();
}

void SchedulerCore::SendQueuedShutdowns() {
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
    request.header.mutable_membership()->set_num_workers(note.num_workers);
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
    bool changed = false;
    for (std::deque<Node>* nodes : {&servers_, &workers_}) {
      for (Node& n : *nodes) {
        if (n.state != NodeState::kAlive || now - n.last_seen <= options_.heartbeat_timeout) {
          continue;
        }
        n.state = NodeState::kDead;
        changed = true;
        if (n.role == proto::WORKER) WorkerLeft(n, now);
        LOG(WARNING) << RoleName(n.role) << " " << n.rank << " at " << n.endpoint
                     << " declared dead: silent for " << absl::FormatDuration(now - n.last_seen);
      }
    }
    if (changed) {
      ReleaseBarriers();
      MaybeEndJob();
    }
    GrantSlots(now);
  }
  SendQueuedShutdowns();
}

}  // namespace r2sp
