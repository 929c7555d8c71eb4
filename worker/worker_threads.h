// --workers_per_process=N: N synthetic workers as threads of one process (as gloo's tests run
// ranks as threads), so that a thousand workers fit on a small machine. Each thread runs a whole
// WorkerSession with a SyntheticTrainer: its own transport and connections, registration and
// rank, heartbeats and FINISH.
// They share only what is read-only (the options) and the process's ZeroMQ context, which
// ZeroMQ makes thread-safe and advises one of per process (its I/O threads carry every thread's
// sockets; with CURVE each node keeps a context of its own, for its ZAP handler).
#ifndef R2SP_WORKER_WORKER_THREADS_H_
#define R2SP_WORKER_WORKER_THREADS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "worker/synthetic_trainer.h"
#include "worker/worker_session.h"
#include "worker/worker_options.h"
#include "zmq.hpp"

namespace r2sp {

// Thread K's copy of a per-worker file: "_tK" before the extension of the last path component
// ("/run/m3.jsonl" -> "/run/m3_t2.jsonl", "/run/dump" -> "/run/dump_t2"); empty stays empty.
std::string ThreadFilePath(const std::string& path, int thread);

// Thread K's worker: `options` with files of its own (ThreadFilePath), workers_per_process 1,
// rank + K if `options` asks for a rank, and `context` as its ZeroMQ context (none with CURVE
// keys).
WorkerOptions ThreadWorkerOptions(const WorkerOptions& options, int thread,
                                  std::shared_ptr<zmq::context_t> context);

// Runs options.workers_per_process workers, one thread each, until every one has returned: OK
// when all finished; else the first error, as "worker thread K: ...", after which the others
// are cancelled (left alone they would wait at barriers for the failed one). `on_lost`: as
// WorkerSession's, from any of their threads (the worker binary exits there: a process's workers
// are lost together). options.Validate()'s error first.
absl::Status RunWorkerThreads(const WorkerOptions& options,
                              WorkerSession::LostHandler on_lost);

}  // namespace r2sp

#endif  // R2SP_WORKER_WORKER_THREADS_H_
