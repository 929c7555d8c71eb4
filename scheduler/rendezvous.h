// The job's rendezvous: the REGISTER requests held until every server and worker the job wants
// has registered, the model the workers agree on (the first worker's; every other worker, and
// every worker joining the running job later, must describe the same), and the ranks the
// workers asked for (proto RegisterRequest.requested_rank), which it honours.
#ifndef R2SP_SCHEDULER_RENDEZVOUS_H_
#define R2SP_SCHEDULER_RENDEZVOUS_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/handler.h"
#include "scheduler/waiting_registers.h"

namespace r2sp {

struct RankedRegister {
  WaitingRegister held;
  int rank;
};

// Not thread-safe: SchedulerCore calls it under its lock.
class Rendezvous {
 public:
  // REQUIRES: num_servers >= 1, num_workers >= 1.
  Rendezvous(int num_servers, int num_workers);

  // A server's or worker's REGISTER before the job runs (its role, key and fields checked by
  // the caller). OK: held until complete(). An error, and `responder` has not been answered:
  // INVALID_ARGUMENT (a worker without a model or with another one, or asking for a rank
  // outside [0, num_workers)), FAILED_PRECONDITION (one node of its role too many, or a rank
  // another held worker asked for), PERMISSION_DENIED (a repeat over another connection). A
  // repeat (the same instance id) replaces the held request, its rank included.
  absl::Status Register(const proto::RegisterRequest& reg, Responder& responder, absl::Time now);
  // Whether every node the job wants has registered (set by the registration that completed
  // it, as counted by role then).
  bool complete() const { return complete_; }
  // The held registrations, in the order they came (to fail them).
  std::vector<WaitingRegister> Take() { return pending_.TakeAll(); }
  // Once complete: the held registrations in the order they came, each with its rank. Servers
  // rank in the order they came; each worker that asked for a rank gets it, and the others get
  // the ranks left, lowest first, in the order they came.
  std::vector<RankedRegister> TakeRanked();

  // Whether `model` is the one the first worker registered.
  bool SameModel(const google::protobuf::RepeatedPtrField<proto::TensorSpec>& model) const;
  const std::vector<proto::TensorSpec>& model() const { return model_; }

 private:
  int Count(proto::Role role) const;
  // OK, or why the rank `reg` asks for cannot be given (Register's errors).
  absl::Status CheckRequestedRank(const proto::RegisterRequest& reg) const;

  const int num_servers_;
  const int num_workers_;
  WaitingRegisters pending_;
  std::vector<proto::TensorSpec> model_;
  bool complete_ = false;
};

}  // namespace r2sp

#endif  // R2SP_SCHEDULER_RENDEZVOUS_H_
