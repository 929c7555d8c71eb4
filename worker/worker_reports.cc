// See worker_reports.h.
#include "worker/worker_reports.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/codec/codec_spec.h"
#include "common/durable_file.h"
#include "common/status_macros.h"
#include "common/sync_modes.h"
#include "glog/logging.h"

namespace r2sp {

void LogJoined(const SessionOptions& options, const proto::RegisterReply& registration,
               const ModelLayout& layout) {
  const proto::AddressBook& book = registration.book();
  LOG(INFO) << "worker " << registration.rank() << "/" << book.workers_size() << ": "
            << options.model << ", " << layout.total_bytes() << " bytes in "
            << layout.partitions().size() << " partitions over " << book.servers_size()
            << " servers (" << SyncModeName(book.sync()) << "; push "
            << codec::CodecSpecName(options.ps.push_codec)
            << (options.ps.push_codec.sparse() && options.ps.dense_below > 0
                    ? absl::StrCat(" with tensors under ", options.ps.dense_below,
                                   " values whole")
                    : "")
            << ", pull " << codec::CodecSpecName({options.exchange.pull_codec}) << ")";
}

void PrintTrained(int rank, const LoopResult& r) {
  std::printf("worker %d: %lld steps, %lld samples in %.1f s (%.0f samples/s; compute %.1f s, "
              "push+pull %.1f s, of which waiting %.1f s; last batch %d)\n",
              rank, static_cast<long long>(r.steps), static_cast<long long>(r.samples), r.seconds,
              r.samples / std::max(r.seconds, 1e-9), r.compute_seconds,
              r.push_seconds + r.pull_seconds, r.wait_seconds, r.final_batch);
  std::fflush(stdout);
}

proto::NodeCounters FinishCounters(const SessionOptions& options, const LoopResult& result,
                                   const PsClientCounters& client, uint64_t dropped_messages) {
  proto::NodeCounters counters;
  counters.set_iterations(result.steps);
  counters.set_seconds(result.seconds);
  counters.set_model(options.model);
  counters.set_push_codec(codec::CodecSpecName(options.ps.push_codec));
  counters.set_pull_codec(codec::CodecSpecName({options.exchange.pull_codec}));
  counters.set_test_accuracy(result.test_accuracy);  // -1: nothing evaluated
  if (options.model != "synthetic") {
    counters.set_samples(result.samples);
    counters.set_epochs(result.epochs);
    counters.set_final_loss(result.last_epoch_loss);
  }
  counters.set_bytes_pushed(client.bytes_pushed);
  counters.set_bytes_pulled(client.bytes_pulled);
  counters.set_pushes(client.pushes);
  counters.set_pulls(client.pulls);
  counters.set_retried_requests(client.retries);
  counters.set_rolled_back_steps(client.rolled_back_steps);
  counters.set_dropped_messages(dropped_messages);
  return counters;
}

std::string ParamBytes(const float* params, size_t n) {
  return std::string(reinterpret_cast<const char*>(params), n * sizeof(float));
}

absl::Status DumpParams(const std::string& path, const float* params, size_t n,
                        const std::string& local_bytes) {
  if (path.empty()) return absl::OkStatus();
  R2SP_RETURN_IF_ERROR_WITH(WriteFileAtomically(path, ParamBytes(params, n)),
                            "writing --dump_params");
  if (local_bytes.empty()) return absl::OkStatus();
  return WithContext(WriteFileAtomically(path + ".local", local_bytes),
                     "writing --dump_params's .local");
}

}  // namespace r2sp
