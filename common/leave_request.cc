// See leave_request.h.
#include "common/leave_request.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace r2sp {

proto::LeaveRequest MakeLeaveRequest(const std::string& reason,
                                     const proto::NodeCounters& counters) {
  proto::LeaveRequest leave;
  leave.set_reason(reason.empty() ? "stopped" : reason.substr(0, kMaxLeaveReasonBytes));
  *leave.mutable_counters() = counters;
  return leave;
}

absl::StatusOr<proto::LeaveRequest> DecodeLeaveRequest(const proto::Header& header) {
  if (header.type() != proto::LEAVE) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a LEAVE: ", proto::MsgType_Name(header.type())));
  }
  if (!header.has_leave()) return absl::InvalidArgumentError("LEAVE without its leave body");
  const std::string& reason = header.leave().reason();
  if (reason.empty() || reason.size() > kMaxLeaveReasonBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LEAVE needs a reason of 1 to ", kMaxLeaveReasonBytes, " bytes, not ", reason.size()));
  }
  return header.leave();
}

}  // namespace r2sp
