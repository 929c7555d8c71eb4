// See rendezvous.h.
#include "scheduler/rendezvous.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/peer_checks.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace r2sp {

Rendezvous::Rendezvous(int num_servers, int num_workers)
    : num_servers_(num_servers), num_workers_(num_workers) {}

bool Rendezvous::SameModel(
    const google::protobuf::RepeatedPtrField<proto::TensorSpec>& model) const {
  if (static_cast<int>(model_.size()) != model.size()) return false;
  for (int i = 0; i < model.size(); ++i) {
    if (model_[i].name() != model[i].name() ||
        model_[i].num_elements() != model[i].num_elements()) {
      return false;
    }
  }
  return true;
}

int Rendezvous::Count(proto::Role role) const {
  int n = 0;
  for (const WaitingRegister& w : pending_.held()) n += w.request.role() == role;
  return n;
}

absl::Status Rendezvous::CheckRequestedRank(const proto::RegisterRequest& reg) const {
  if (!reg.has_requested_rank()) return absl::OkStatus();
  const int rank = reg.requested_rank();
  if (rank < 0 || rank >= num_workers_) {
    return absl::InvalidArgumentError(absl::StrCat("this worker asks for rank ", rank,
                                                   ", but the job has ", num_workers_,
                                                   " workers (ranks 0 to ", num_workers_ - 1, ")"));
  }
  for (const WaitingRegister& w : pending_.held()) {
    if (w.request.instance_id() != reg.instance_id() && w.request.has_requested_rank() &&
        w.request.requested_rank() == rank) {
      return absl::FailedPreconditionError(
          absl::StrCat("this worker asks for rank ", rank, ", which the worker registered from ",
                       w.request.endpoint(), " asked for already"));
    }
  }
  return absl::OkStatus();
}

absl::Status Rendezvous::Register(const proto::RegisterRequest& reg, Responder& responder,
                                  absl::Time now) {
  if (reg.role() == proto::WORKER) {
    R2SP_RETURN_IF_ERROR(CheckRequestedRank(reg));
    if (reg.model_size() == 0) {
      return absl::InvalidArgumentError("a worker must describe its model");
    }
    if (model_.empty()) {
      model_.assign(reg.model().begin(), reg.model().end());
    } else if (!SameModel(reg.model())) {
      LOG(WARNING) << "worker " << reg.instance_id() << " registered a different model";
      return absl::InvalidArgumentError(
          "this worker's model differs from the one the first worker registered");
    }
  }
  bool repeat = false;
  for (const WaitingRegister& w : pending_.held()) {
    repeat |= w.request.instance_id() == reg.instance_id();
  }
  R2SP_RETURN_IF_ERROR(pending_.Park(reg, responder, now));  // a repeat: answer the newest
  if (repeat) return absl::OkStatus();
  const int servers = Count(proto::SERVER), workers = Count(proto::WORKER);
  LOG(INFO) << RoleName(reg.role()) << " registered from " << reg.endpoint()
            << (reg.has_requested_rank() ? absl::StrCat(" asking for rank ", reg.requested_rank())
                                         : "")
            << " (" << servers << "/" << num_servers_ << " servers, " << workers << "/"
            << num_workers_ << " workers)";
  if (servers > num_servers_ || workers > num_workers_) {
    responder = pending_.TakeLast().responder;  // one too many: answered with the error
    return absl::FailedPreconditionError(absl::StrCat("the job wants ", num_servers_,
                                                      " servers and ", num_workers_,
                                                      " workers; this one is one too many"));
  }
  complete_ = servers == num_servers_ && workers == num_workers_;
  return absl::OkStatus();
}

std::vector<RankedRegister> Rendezvous::TakeRanked() {
  std::vector<WaitingRegister> held = pending_.TakeAll();
  // Register refused ranks out of range and asked twice, and no more than num_workers_ workers
  // are held, so the ranks left are enough for the workers that asked for none.
  std::vector<bool> taken(num_workers_, false);
  for (const WaitingRegister& w : held) {
    if (w.request.role() == proto::WORKER && w.request.has_requested_rank()) {
      taken[w.request.requested_rank()] = true;
    }
  }
  std::vector<RankedRegister> ranked;
  int next_server = 0, next_free = 0;
  for (WaitingRegister& w : held) {
    int rank;
    if (w.request.role() == proto::SERVER) {
      rank = next_server++;
    } else if (w.request.has_requested_rank()) {
      rank = w.request.requested_rank();
    } else {
      while (next_free < num_workers_ && taken[next_free]) ++next_free;
      CHECK_LT(next_free, num_workers_) << "more workers held than the job has";
      rank = next_free++;
    }
    ranked.push_back(RankedRegister{std::move(w), rank});
  }
  return ranked;
}

}  // namespace r2sp
