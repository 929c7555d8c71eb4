// What a job's scheduler options tell its membership: the counts, the timeouts, and the
// job-wide settings every node finds in the address book (partition size, mode, staleness,
// elastic period and alpha, slot rules, job id, global batch).
#ifndef R2SP_SCHEDULER_MEMBERSHIP_SETTINGS_H_
#define R2SP_SCHEDULER_MEMBERSHIP_SETTINGS_H_

#include "scheduler/membership.h"
#include "scheduler/scheduler_options.h"

namespace r2sp {

MembershipOptions MembershipOptionsFor(const SchedulerOptions& options);

}  // namespace r2sp

#endif  // R2SP_SCHEDULER_MEMBERSHIP_SETTINGS_H_
