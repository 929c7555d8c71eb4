// See realtime_priority.h.
#include "scheduler/realtime_priority.h"

#include <sched.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace r2sp {

absl::Status UseRealtimePriority(int priority) {
  if (priority == 0) return absl::OkStatus();
  if (priority < 0 || priority > 99) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--realtime_priority=", priority, ": give 0 (off) or a SCHED_FIFO priority from 1 to 99"));
  }
  sched_param param{};
  param.sched_priority = priority;
  if (sched_setscheduler(0, SCHED_FIFO, &param) != 0) {
    const int error = errno;
    if (error == EPERM) {
      return absl::PermissionDeniedError(absl::StrCat(
          "--realtime_priority=", priority, " needs CAP_SYS_NICE: run the scheduler as root, "
          "grant it (setcap cap_sys_nice+ep scheduler), or leave the flag at 0"));
    }
    return absl::InternalError(absl::StrCat("sched_setscheduler: ", std::strerror(error)));
  }
  return absl::OkStatus();
}

}  // namespace r2sp
