// REGISTER requests the scheduler holds unanswered until what they wait for comes: the whole
// job's registrations (rendezvous), a free data shard or the join before them (joining
// workers), a lost server to replace (replacement servers). A node that repeats its REGISTER
// over the same connection is answered at its newest request; over another connection, the
// repeat is refused (a peer may not take over another's registration).
#ifndef R2SP_SCHEDULER_WAITING_REGISTERS_H_
#define R2SP_SCHEDULER_WAITING_REGISTERS_H_

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/handler.h"
#include "proto/messages.pb.h"

namespace r2sp {

struct WaitingRegister {
  proto::RegisterRequest request;
  Responder responder;
  absl::Time since;  // when it first came
};

// Not thread-safe: SchedulerCore calls it under its lock.
class WaitingRegisters {
 public:
  // Holds `responder` for `reg` from `now` (a repeat of an instance id over the same connection
  // replaces the held responder and keeps its place and time). PERMISSION_DENIED for a repeat
  // over another connection: `responder` has not been answered.
  absl::Status Park(const proto::RegisterRequest& reg, Responder& responder, absl::Time now);

  // Takes every held request, oldest first; PutBack returns those still waiting, ahead of any
  // parked meanwhile.
  std::vector<WaitingRegister> TakeAll();
  void PutBack(std::vector<WaitingRegister> still);
  // Takes the request parked last. REQUIRES: size() > 0.
  WaitingRegister TakeLast();

  // Answers every held request with `status` and drops them.
  void AnswerAll(const absl::Status& status);

  const std::vector<WaitingRegister>& held() const { return held_; }
  size_t size() const { return held_.size(); }

 private:
  std::vector<WaitingRegister> held_;
};

}  // namespace r2sp

#endif  // R2SP_SCHEDULER_WAITING_REGISTERS_H_
