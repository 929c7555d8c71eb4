// LEAVE, a worker's clean leave (SIGTERM, a pod's or a Slurm job's preemption): the one place
// that says what a valid one is, for the worker that sends it and the scheduler that acts on it.
#ifndef R2SP_COMMON_LEAVE_REQUEST_H_
#define R2SP_COMMON_LEAVE_REQUEST_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "proto/messages.pb.h"

namespace r2sp {

// A LEAVE's reason is for the logs: short.
inline constexpr size_t kMaxLeaveReasonBytes = 200;

// The body of a LEAVE: `reason` (cut to kMaxLeaveReasonBytes; "stopped" if empty) and the
// worker's counters so far.
proto::LeaveRequest MakeLeaveRequest(const std::string& reason,
                                     const proto::NodeCounters& counters);

// The LEAVE body of `header`, or INVALID_ARGUMENT: not a LEAVE, no body, or a reason that is
// empty or longer than kMaxLeaveReasonBytes.
absl::StatusOr<proto::LeaveRequest> DecodeLeaveRequest(const proto::Header& header);

}  // namespace r2sp

#endif  // R2SP_COMMON_LEAVE_REQUEST_H_
