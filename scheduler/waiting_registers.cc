// See waiting_registers.h.
#include "scheduler/waiting_registers.h"

#include <iterator>
#include <utility>

#include "glog/logging.h"

namespace r2sp {

absl::Status WaitingRegisters::Park(const proto::RegisterRequest& reg, Responder& responder,
                                    absl::Time now) {
  for (WaitingRegister& w : held_) {
    if (w.request.instance_id() != reg.instance_id()) continue;
    if (w.responder.routing_id() != responder.routing_id()) {
      return absl::PermissionDeniedError(
          "REGISTER repeated an instance id over another connection");
    }
    w.request = reg;
    w.responder = std::move(responder);
    return absl::OkStatus();
  }
  held_.push_back(WaitingRegister{reg, std::move(responder), now});
  return absl::OkStatus();
}

std::vector<WaitingRegister> WaitingRegisters::TakeAll() {
  std::vector<WaitingRegister> all;
  all.swap(held_);
  return all;
}

void WaitingRegisters::PutBack(std::vector<WaitingRegister> still) {
  still.insert(still.end(), std::make_move_iterator(held_.begin()),
               std::make_move_iterator(held_.end()));
  held_ = std::move(still);
}

WaitingRegister WaitingRegisters::TakeLast() {
  CHECK(!held_.empty());
  WaitingRegister last = std::move(held_.back());
  held_.pop_back();
  return last;
}

void WaitingRegisters::AnswerAll(const absl::Status& status) {
  for (WaitingRegister& w : held_) w.responder.ReplyStatus(status);
  held_.clear();
}

}  // namespace r2sp
