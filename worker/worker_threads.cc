// See worker_threads.h.
#include "worker/worker_threads.h"

#include <algorithm>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"

namespace r2sp {

std::string ThreadFilePath(const std::string& path, int thread) {
  if (path.empty()) return path;
  const size_t slash = path.rfind('/');
  const size_t base = slash == std::string::npos ? 0 : slash + 1;
  size_t dot = path.rfind('.');
  if (dot == std::string::npos || dot <= base) dot = path.size();  // no extension (".x": none)
  return absl::StrCat(path.substr(0, dot), "_t", thread, path.substr(dot));
}

WorkerOptions ThreadWorkerOptions(const WorkerOptions& options, int thread,
                                  std::shared_ptr<zmq::context_t> context) {
  WorkerOptions o = options;
  o.workers_per_process = 1;
  if (options.rank >= 0) o.rank = options.rank + thread;
  o.metrics_path = ThreadFilePath(options.metrics_path, thread);
  o.timeline_path = ThreadFilePath(options.timeline_path, thread);
  o.dump_params_path = ThreadFilePath(options.dump_params_path, thread);
  if (o.connection.curve == nullptr) o.connection.zmq_context = std::move(context);
  return o;
}

absl::Status RunWorkerThreads(const WorkerOptions& options,
                              WorkerSession::LostHandler on_lost) {
  R2SP_RETURN_IF_ERROR(options.Validate());
  const int n = options.workers_per_process;
  std::shared_ptr<zmq::context_t> context;
  if (options.connection.curve == nullptr) {
    context = std::make_shared<zmq::context_t>(std::max(1, options.connection.io_threads));
  }
  std::vector<std::unique_ptr<WorkerSession>> sessions;
  std::vector<std::unique_ptr<SyntheticTrainer>> trainers;
  for (int k = 0; k < n; ++k) {
    const WorkerOptions thread_options = ThreadWorkerOptions(options, k, context);
    sessions.push_back(std::make_unique<WorkerSession>(thread_options, on_lost));
    trainers.push_back(std::make_unique<SyntheticTrainer>(thread_options));
  }
  absl::Mutex mu;
  absl::Status first ABSL_GUARDED_BY(mu);
  std::vector<std::thread> threads;
  for (int k = 0; k < n; ++k) {
    threads.emplace_back([&, k] {
      const absl::Status status = RunWorker(sessions[k].get(), trainers[k].get());
      if (status.ok()) return;
      {
        absl::MutexLock lock(&mu);
        if (!first.ok()) return;  // the others were cancelled already
        first = absl::Status(status.code(),
                             absl::StrCat("worker thread ", k, ": ", status.message()));
      }
      for (std::unique_ptr<WorkerSession>& session : sessions) session->Cancel();
    });
  }
  for (std::thread& t : threads) t.join();
  absl::MutexLock lock(&mu);
  return first;
}

}  // namespace r2sp
