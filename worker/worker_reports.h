// What a worker says about itself (worker_session.h, the trainers): the line it logs once it
// joined, the summary it prints after training, and the counters its FINISH carries to the
// scheduler (which the launcher's summary.json reports).
#ifndef R2SP_WORKER_WORKER_REPORTS_H_
#define R2SP_WORKER_WORKER_REPORTS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/model_layout.h"
#include "proto/messages.pb.h"
#include "worker/ps_client.h"
#include "worker/loop_options.h"
#include "worker/session_options.h"

namespace r2sp {

// "worker R/N: MODEL, B bytes in P partitions over S servers (MODE; push ..., pull ...)".
void LogJoined(const SessionOptions& options, const proto::RegisterReply& registration,
               const ModelLayout& layout);

// "worker R: S steps, N samples in T s (...)".
void PrintTrained(int rank, const LoopResult& result);

// FINISH's counters: the run's, the client's, and the messages the transport dropped.
proto::NodeCounters FinishCounters(const SessionOptions& options, const LoopResult& result,
                                   const PsClientCounters& client, uint64_t dropped_messages);

// The bytes of n fp32 parameters (raw, as --dump_params writes them).
std::string ParamBytes(const float* params, size_t n);
// --dump_params: the final parameters to `path` (none if empty) and, when not empty,
// `local_bytes` (an elastic worker's own parameters) to PATH.local.
absl::Status DumpParams(const std::string& path, const float* params, size_t n,
                        const std::string& local_bytes);

}  // namespace r2sp

#endif  // R2SP_WORKER_WORKER_REPORTS_H_
