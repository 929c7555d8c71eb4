// The scheduler's end-of-job report (its --stats_json): every node's counters and state, the
// slot grants and width, the batch tuner's state, the failure and the refused requests, the
// scheduler's own measurements ("scale": scheduler_metrics.h), as JSON. Pure: formats what it is given.
#ifndef R2SP_SCHEDULER_JOB_REPORT_H_
#define R2SP_SCHEDULER_JOB_REPORT_H_

#include <cstdint>
#include <string>

#include "scheduler/node_table.h"
#include "scheduler/slot_coordinator.h"

namespace r2sp {

struct JobReport {
  proto::SyncMode sync = proto::ASP;
  std::string failure;           // why the job failed, or empty
  uint64_t denied_requests = 0;  // refused for a sender that was not who it claimed
  std::string scale = "null";    // SchedulerMetrics::Json, the "scale" object
};

// The report as one line of JSON (with a trailing newline).
std::string JobReportJson(const JobReport& report, const NodeTable& nodes,
                          const SlotCoordinator& slots);

}  // namespace r2sp

#endif  // R2SP_SCHEDULER_JOB_REPORT_H_
