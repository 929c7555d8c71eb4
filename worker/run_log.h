// What one worker records about its run: per-iteration metrics and evaluations as JSON lines
// (evaluation lines carry "event": "eval"; iteration lines have no "event"), and a timeline in
// the Chrome trace-event format (chrome://tracing, Perfetto) with one track per worker showing
// its compute, wait, push and pull spans. Timestamps are Unix-epoch microseconds, so the
// launcher can merge the timelines of all the workers of a job into one file.
#ifndef R2SP_WORKER_RUN_LOG_H_
#define R2SP_WORKER_RUN_LOG_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace r2sp {

struct IterationMetrics {
  int64_t clock = 0;
  int epoch = 0;
  int batch = 0;
  double compute_seconds = 0;  // forward/backward (and any emulated slowdown)
  double wait_seconds = 0;     // slot wait (r2sp) + time pulls were parked (bsp, ssp)
  double push_seconds = 0;
  double pull_seconds = 0;     // including the parked time
  uint64_t push_bytes = 0;     // the model's fp32 bytes (what travelled: PsClient's counters)
  uint64_t pull_bytes = 0;
  double loss = 0;
  double gap_seconds = 0;      // r2sp: the slot gap in force
  double parked_seconds = 0;   // of pull_seconds, the time the pull was parked on a server
  int early_partitions = 0;    // --overlap: partitions whose push began during backward
  // --overlap: this iteration's pull was left running into the next compute (pull_seconds is
  // the time each iteration waited for pulls: its own, or the previous one's during compute).
  bool pull_overlapped = false;

  // The worker's own communication time: push and pull, parked time excluded.
  double CommSeconds() const { return push_seconds + pull_seconds - parked_seconds; }
};

// One evaluation of the test set, after an epoch.
struct EvaluationRecord {
  int epoch = 0;               // 1-based: the epoch evaluated in (done, if at its end)
  int64_t step = 0;            // steps done in all
  double test_accuracy = 0;
  double test_loss = 0;        // mean per sample
  double train_loss = 0;       // mean over the epoch's steps so far
  double elapsed_seconds = 0;  // since the training loop started
};

// Not thread-safe: the worker's training thread writes it.
class RunLog {
 public:
  // Either path may be empty (that output is off). Unavailable if a file cannot be opened.
  static absl::StatusOr<std::unique_ptr<RunLog>> Open(const std::string& metrics_path,
                                                      const std::string& timeline_path, int rank);
  ~RunLog();  // completes the timeline's JSON array

  void Span(const char* name, absl::Time start, absl::Time end, const std::string& args_json = "");
  void Metrics(const IterationMetrics& m);
  void Evaluation(const EvaluationRecord& e);

 private:
  RunLog(int rank) : rank_(rank) {}
  const int rank_;
  FILE* metrics_ = nullptr;
  FILE* timeline_ = nullptr;
};

}  // namespace r2sp

#endif  // R2SP_WORKER_RUN_LOG_H_
