// See run_log.h.
#include "worker/run_log.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace r2sp {

absl::StatusOr<std::unique_ptr<RunLog>> RunLog::Open(const std::string& metrics_path,
                                                     const std::string& timeline_path, int rank) {
  std::unique_ptr<RunLog> log(new RunLog(rank));
  if (!metrics_path.empty()) {
    log->metrics_ = std::fopen(metrics_path.c_str(), "w");
    if (log->metrics_ == nullptr) {
      return absl::UnavailableError(absl::StrCat("cannot write ", metrics_path));
    }
  }
  if (!timeline_path.empty()) {
    log->timeline_ = std::fopen(timeline_path.c_str(), "w");
    if (log->timeline_ == nullptr) {
      return absl::UnavailableError(absl::StrCat("cannot write ", timeline_path));
    }
    std::fprintf(log->timeline_,
                 "[\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, "
                 "\"args\": {\"name\": \"worker %d\"}}",
                 rank, rank);
  }
  return log;
}

RunLog::~RunLog() {
  if (metrics_ != nullptr) std::fclose(metrics_);
  if (timeline_ != nullptr) {
    std::fprintf(timeline_, "\n]\n");
    std::fclose(timeline_);
  }
}

void RunLog::Span(const char* name, absl::Time start, absl::Time end, const std::string& args_json) {
  if (timeline_ == nullptr) return;
  std::fprintf(timeline_,
               ",\n{\"name\": \"%s\", \"cat\": \"r2sp\", \"ph\": \"X\", \"pid\": 1, \"tid\": %d, "
               "\"ts\": %lld, \"dur\": %lld%s%s}",
               name, rank_, static_cast<long long>(absl::ToUnixMicros(start)),
               static_cast<long long>(absl::ToInt64Microseconds(end - start)),
               args_json.empty() ? "" : ", \"args\": ", args_json.c_str());
}

void RunLog::Metrics(const IterationMetrics& m) {
  if (metrics_ == nullptr) return;
  std::fprintf(metrics_,
               "{\"worker\": %d, \"clock\": %lld, \"epoch\": %d, \"batch\": %d, "
               "\"compute_s\": %.6f, \"wait_s\": %.6f, \"push_s\": %.6f, \"pull_s\": %.6f, "
               "\"push_bytes\": %llu, \"pull_bytes\": %llu, \"loss\": %.6f, \"gap_s\": %.6f, "
               "\"early_partitions\": %d, \"pull_overlapped\": %s, \"t\": %.6f}\n",
               rank_, static_cast<long long>(m.clock), m.epoch, m.batch, m.compute_seconds,
               m.wait_seconds, m.push_seconds, m.pull_seconds,
               static_cast<unsigned long long>(m.push_bytes),
               static_cast<unsigned long long>(m.pull_bytes), m.loss, m.gap_seconds,
               m.early_partitions, m.pull_overlapped ? "true" : "false",
               absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
}

void RunLog::Evaluation(const EvaluationRecord& e) {
  if (metrics_ == nullptr) return;
  std::fprintf(metrics_,
               "{\"worker\": %d, \"event\": \"eval\", \"epoch\": %d, \"step\": %lld, \"test_accuracy\": %.6f, "
               "\"test_loss\": %.6f, \"train_loss\": %.6f, \"elapsed_s\": %.6f, \"t\": %.6f}\n",
               rank_, e.epoch, static_cast<long long>(e.step), e.test_accuracy, e.test_loss, e.train_loss, e.elapsed_seconds,
               absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
  std::fflush(metrics_);
}

}  // namespace r2sp
