// See scheduler_core.h. The membership part of SchedulerCore: registration and rank assignment,
// and the address book (workers joining a running job: scheduler_joins.cc).
#include <deque>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "scheduler/scheduler_core.h"

namespace r2sp {
namespace {

bool SameModel(const std::vector<proto::TensorSpec>& a,
               const google::protobuf::RepeatedPtrField<proto::TensorSpec>& b) {
  if (static_cast<int>(a.size()) != b.size()) return false;
  for (int i = 0; i < b.size(); ++i) {
    if (a[i].name() != b[i].name() || a[i].num_elements() != b[i].num_elements()) return false;
  }
  return true;
}

}  // namespace

void SchedulerCore::HandleRegister(const Message& request, Responder& responder,
                                   absl::Time now) {
  if (!request.header.has_register_request()) {
    responder.ReplyStatus(absl::InvalidArgumentError("REGISTER without a register_request"));
    return;
  }
  const proto::RegisterRequest& reg = request.header.register_request();
  if (reg.role() != proto::SERVER && reg.role() != proto::WORKER) {
    responder.ReplyStatus(absl::InvalidArgumentError("only servers and workers register"));
    return;
  }
  if (!responder.MayBe(reg.role())) {
    Deny(responder, absl::StrCat("a peer without a ", RoleName(reg.role()),
                                 "'s key tried to register as one"));
    return;
  }
  if (reg.endpoint().empty() || reg.instance_id().empty()) {
    responder.ReplyStatus(absl::InvalidArgumentError("REGISTER needs endpoint and instance_id"));
    return;
  }
  const absl::Status beat =
      CheckHeartbeatPeriod(reg.heartbeat_period_ms(), options_.heartbeat_timeout);
  if (!beat.ok()) return responder.ReplyStatus(beat);
  if (rendezvous_done_) {
    if (reg.role() == proto::SERVER && !shutting_down_) {
      ReplaceServer(reg, responder, now);
      return;
    }
    if (reg.role() == proto::WORKER && !shutting_down_) {
      if (!SameModel(model_, reg.model())) {
        responder.ReplyStatus(absl::InvalidArgumentError(
            "this worker's model differs from the running job's"));
        return;
      }
      JoinWorker(reg, responder, now);
      return;
    }
    responder.ReplyStatus(absl::FailedPreconditionError("the job is ending"));
    return;
  }
  if (reg.role() == proto::WORKER) {
    if (reg.model_size() == 0) {
      responder.ReplyStatus(absl::InvalidArgumentError("a worker must describe its model"));
      return;
    }
    if (model_.empty()) {
      model_.assign(reg.model().begin(), reg.model().end());
    } else if (!SameModel(model_, reg.model())) {
      LOG(WARNING) << "worker " << reg.instance_id() << " registered a different model";
      responder.ReplyStatus(absl::InvalidArgumentError(
          "this worker's model differs from the one the first worker registered"));
      return;
    }
  }
  for (PendingRegister& p : pending_) {
    if (p.request.instance_id() == reg.instance_id()) {  // a retry: answer the newest
      if (p.responder.routing_id() != responder.routing_id()) {
        Deny(responder, "REGISTER repeated an instance id over another connection");
        return;
      }
      p = PendingRegister{reg, std::move(responder)};
      return;
    }
  }
  pending_.push_back(PendingRegister{reg, std::move(responder)});
  int servers = 0, workers = 0;
  for (const PendingRegister& p : pending_) {
    (p.request.role() == proto::SERVER ? servers : workers)++;
  }
  LOG(INFO) << RoleName(reg.role()) << " registered from " << reg.endpoint() << " ("
            << servers << "/" << options_.num_servers << " servers, " << workers << "/"
            << options_.num_workers << " workers)";
  if (servers > options_.num_servers || workers > options_.num_workers) {
    PendingRegister extra = std::move(pending_.back());
    pending_.pop_back();
    extra.responder.ReplyStatus(absl::FailedPreconditionError(absl::StrCat(
        "the job wants ", options_.num_servers, " servers and ", options_.num_workers,
        " workers; this one is one too many")));
    return;
  }
  if (servers == options_.num_servers && workers == options_.num_workers) {
    CompleteRendezvous(now);
  }
}

proto::AddressBook SchedulerCore::Book(bool for_servers) const {
  proto::AddressBook book;
  for (const std::deque<Node>* nodes : {&servers_, &workers_}) {
    for (const Node& n : *nodes) {
      proto::NodeInfo* info = n.role == proto::SERVER ? book.add_servers() : book.add_workers();
      info->set_role(n.role);
      info->set_rank(n.rank);
      info->set_endpoint(n.endpoint);
      info->set_incarnation(n.incarnation);
      if (for_servers && n.role == proto::WORKER) info->set_routing_id(n.routing_id);
    }
  }
  for (const proto::TensorSpec& t : model_) *book.add_model() = t;
  book.set_partition_bytes(options_.partition_bytes);
  book.set_sync(options_.sync);
  book.set_staleness(options_.staleness);
  book.set_r2sp_slot_includes_pull(options_.r2sp_slot_includes_pull);
  book.set_job_id(options_.job_id);
  book.set_server_replace_ms(absl::ToInt64Milliseconds(ServerReplaceTimeout()));
  book.set_absorb_orphaned_shards(options_.absorb_orphaned_shards);
  book.set_heartbeat_timeout_ms(absl::ToInt64Milliseconds(options_.heartbeat_timeout));
  if (slots_.tuner() != nullptr) {
    book.set_hetero_batching(true);
    book.set_global_batch(options_.batching.global_batch);
    book.set_initial_batch(slots_.tuner()->batch(0));
  }
  return book;
}

void SchedulerCore::CompleteRendezvous(absl::Time now) {
  for (const PendingRegister& p : pending_) {
    std::deque<Node>& nodes = p.request.role() == proto::SERVER ? servers_ : workers_;
    nodes.push_back(Node{p.request.role(), static_cast<int>(nodes.size()), p.request.endpoint(),
                         p.request.instance_id(), p.responder.routing_id(), now});
    nodes.back().data_shard = nodes.back().rank;
    if (p.request.role() == proto::SERVER) {
      requester_->ExpectPeer(p.request.endpoint(), proto::SERVER);
    }
  }
  slots_.SetMembers(options_.num_workers);
  const proto::AddressBook book = Book(/*for_servers=*/false);
  const proto::AddressBook server_book = Book(/*for_servers=*/true);
  int server_rank = 0, worker_rank = 0;
  for (PendingRegister& p : pending_) {
    Message reply;
    proto::RegisterReply* r = reply.header.mutable_register_reply();
    r->set_rank(p.request.role() == proto::SERVER ? server_rank++ : worker_rank++);
    r->set_data_shard(p.request.role() == proto::WORKER ? r->rank() : -1);
    r->set_data_world(options_.num_workers);
    *r->mutable_book() = p.request.role() == proto::SERVER ? server_book : book;
    r->set_scheduler_id(requester_->RoutingId());
    p.responder.Reply(std::move(reply));
  }
  pending_.clear();
  rendezvous_done_ = true;
  LOG(INFO) << "all " << servers_.size() << " servers and " << workers_.size()
            << " workers registered; address book sent";
}

}  // namespace r2sp
