// See membership.h.
#include "scheduler/membership.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/peer_checks.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "scheduler/register_replies.h"
#include "scheduler/scheduler_options.h"

namespace r2sp {

Membership::Membership(const MembershipOptions& options, NodeTable* nodes, SlotCoordinator* slots,
                       const BarrierBook* barriers, Requester* requester)
    : num_workers_(options.num_workers),
      heartbeat_timeout_(options.heartbeat_timeout),
      book_settings_(options.book_settings),
      nodes_(nodes),
      slots_(slots),
      barriers_(barriers),
      requester_(requester),
      rendezvous_(options.num_servers, options.num_workers),
      joins_(JoinCoordinatorOptions{options.sync, options.num_workers, options.heartbeat_timeout},
             nodes),
      replacement_(
          ServerReplacementOptions{options.sync, options.num_servers,
                                   options.server_replace_timeout, options.heartbeat_timeout},
          nodes) {
  book_settings_.set_server_replace_ms(absl::ToInt64Milliseconds(replacement_.timeout()));
}

absl::Status Membership::Register(const proto::Header& header, Responder& responder, absl::Time now,
                                  bool ending, const std::string& failure) {
  if (!header.has_register_request()) {
    return absl::InvalidArgumentError("REGISTER without a register_request");
  }
  const proto::RegisterRequest& reg = header.register_request();
  if (reg.role() != proto::SERVER && reg.role() != proto::WORKER) {
    return absl::InvalidArgumentError("only servers and workers register");
  }
  if (!responder.MayBe(reg.role())) {
    return absl::PermissionDeniedError(
        absl::StrCat("a peer without a ", RoleName(reg.role()), "'s key tried to register as one"));
  }
  if (reg.endpoint().empty() || reg.instance_id().empty()) {
    return absl::InvalidArgumentError("REGISTER needs endpoint and instance_id");
  }
  if (reg.role() == proto::SERVER && reg.has_requested_rank()) {
    return absl::InvalidArgumentError("only workers ask for a rank");
  }
  R2SP_RETURN_IF_ERROR(CheckHeartbeatPeriod(reg.heartbeat_period_ms(), heartbeat_timeout_));
  if (rendezvous_done_) {
    const absl::Status status = RegisterWithRunningJob(reg, responder, now, ending, failure);
    FinishJoins(now);
    return status;
  }
  R2SP_RETURN_IF_ERROR(rendezvous_.Register(reg, responder, now));
  if (rendezvous_.complete()) CompleteRendezvous(now);
  return absl::OkStatus();
}

absl::Status Membership::RegisterWithRunningJob(const proto::RegisterRequest& reg,
                                                Responder& responder, absl::Time now, bool ending,
                                                const std::string& failure) {
  if (ending) return absl::FailedPreconditionError("the job is ending");
  if (reg.role() == proto::SERVER) return ReplaceServer(reg, responder, now, failure, false);
  if (!rendezvous_.SameModel(reg.model())) {
    return absl::InvalidArgumentError("this worker's model differs from the running job's");
  }
  return joins_.Join(reg, responder, now);
}

void Membership::CompleteRendezvous(absl::Time now) {
  std::vector<RankedRegister> registered = rendezvous_.TakeRanked();
  // The table gives each node the next rank of its role: add them in rank order.
  std::vector<const RankedRegister*> by_rank;
  for (const RankedRegister& r : registered) by_rank.push_back(&r);
  std::stable_sort(
      by_rank.begin(), by_rank.end(),
      [](const RankedRegister* a, const RankedRegister* b) { return a->rank < b->rank; });
  for (const RankedRegister* r : by_rank) {
    const proto::RegisterRequest& reg = r->held.request;
    const Node& node = nodes_->Add(reg.role(), reg.endpoint(), reg.instance_id(),
                                   r->held.responder.routing_id(), now);
    CHECK_EQ(node.rank, r->rank) << "the rendezvous's ranks are not 0..n-1 per role";
    if (reg.role() == proto::SERVER) requester_->ExpectPeer(reg.endpoint(), proto::SERVER);
  }
  slots_->SetMembers(num_workers_);
  // Each book encoded once, its bytes shared by every reply (not a copy per node).
  const BookFrame book(Book(/*for_servers=*/false));
  const BookFrame server_book(Book(/*for_servers=*/true));
  for (RankedRegister& r : registered) {
    const bool server = r.held.request.role() == proto::SERVER;
    r.held.responder.Reply(RendezvousReply(r.held.request.role(), r.rank, num_workers_,
                                           server ? server_book : book, requester_->RoutingId()));
  }
  rendezvous_done_ = true;
  LOG(INFO) << "all " << nodes_->servers().size() << " servers and " << nodes_->workers().size()
            << " workers registered; address book sent";
}

void Membership::FailRendezvous(const std::string& why) {
  for (WaitingRegister& r : rendezvous_.Take()) {
    r.responder.ReplyStatus(absl::FailedPreconditionError(why));
  }
}

proto::AddressBook Membership::Book(bool for_servers) const {
  return MakeAddressBook(book_settings_, *nodes_, rendezvous_.model(), slots_->tuner(),
                         for_servers);
}

absl::Status Membership::ReplaceServer(const proto::RegisterRequest& reg, Responder& responder,
                                       absl::Time now, const std::string& failure, bool waited) {
  R2SP_ASSIGN_OR_RETURN(Node* const replaced,
                        replacement_.Replace(reg, responder, now, failure, waited));
  if (replaced == nullptr) return absl::OkStatus();  // it waits for a server to be lost
  requester_->ExpectPeer(reg.endpoint(), proto::SERVER);
  responder.Reply(JoinedReply(*replaced, num_workers_, BookFrame(Book(/*for_servers=*/true)),
                              requester_->RoutingId(), *barriers_));
  return absl::OkStatus();
}

void Membership::FinishJoins(absl::Time now) {
  for (CompletedJoin& join : joins_.TakeCompleted()) {
    Node& node = nodes_->workers()[join.rank];
    node.last_seen = now;  // the servers' round trip counted against its heartbeats
    slots_->WorkerJoined(join.rank);
    Message reply = JoinedReply(node, num_workers_, BookFrame(Book(/*for_servers=*/false)),
                                requester_->RoutingId(), *barriers_);
    reply.header.mutable_register_reply()->set_join_clock(join.join_clock);
    join.responder.Reply(std::move(reply));
    LOG(INFO) << "worker " << join.rank << " joined the running job ("
              << slots_->planner().ring().size() << " in the slot ring; data shard "
              << node.data_shard << ")";
  }
}

void Membership::ServerAnswered(int rank, const absl::StatusOr<Message>& reply, absl::Time now) {
  joins_.ServerAnswered(rank, reply);
  FinishJoins(now);
}

void Membership::AdmitWaiting(absl::Time now, bool ending, const std::string& failure) {
  joins_.AdmitWaiting(now, ending);
  FinishJoins(now);
  replacement_.AdmitWaiting(now, ending, [&](WaitingRegister& w) {
    const absl::Status status =
        ReplaceServer(w.request, w.responder, now, failure, /*waited=*/true);
    if (!status.ok()) w.responder.ReplyStatus(status);
  });
}

}  // namespace r2sp
