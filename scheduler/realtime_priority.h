// scheduler --realtime_priority: the scheduler's threads under SCHED_FIFO, so that a slot grant
// due at a timer's expiry does not wait for a core behind the job's other processes (the grant
// latencies with and without it: docs/BENCHMARKS.md#many-workers-on-one-scheduler).
#ifndef R2SP_SCHEDULER_REALTIME_PRIORITY_H_
#define R2SP_SCHEDULER_REALTIME_PRIORITY_H_

#include "absl/status/status.h"

namespace r2sp {

// priority 0: nothing changes. 1-99: the calling thread, and every thread it creates after
// (they inherit the policy), runs under SCHED_FIFO at that priority. Call it before the
// transport starts its threads. InvalidArgument outside [0, 99]; PermissionDenied, saying how
// to grant it, without CAP_SYS_NICE.
absl::Status UseRealtimePriority(int priority);

}  // namespace r2sp

#endif  // R2SP_SCHEDULER_REALTIME_PRIORITY_H_
