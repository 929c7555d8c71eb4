// See rendezvous.h.
#include "scheduler/rendezvous.h"

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

absl::Status Rendezvous::Register(const proto::RegisterRequest& reg, Responder& responder,
                                  absl::Time now) {
  if (reg.role() == proto::WORKER) {
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
  LOG(INFO) << RoleName(reg.role()) << " registered from " << reg.endpoint() << " (" << servers
            << "/" << num_servers_ << " servers, " << workers << "/" << num_workers_ << " workers)";
  if (servers > num_servers_ || workers > num_workers_) {
    responder = pending_.TakeLast().responder;  // one too many: answered with the error
    return absl::FailedPreconditionError(absl::StrCat("the job wants ", num_servers_,
                                                      " servers and ", num_workers_,
                                                      " workers; this one is one too many"));
  }
  complete_ = servers == num_servers_ && workers == num_workers_;
  return absl::OkStatus();
}

}  // namespace r2sp
