// A whole job inside one test binary, over testing::InProcessNetwork: the real SchedulerCore,
// real ServerHandlers, and per worker the real SchedulerClient and PsClient, registered and
// initialised as worker/worker_session.cc does it (ALL barrier, rank 0's initial push, WORKERS
// barrier, first pull). Tests then drive the worker-side code under test from one thread per
// worker.
#ifndef R2SP_TESTS_WORKER_IN_PROCESS_JOB_H_
#define R2SP_TESTS_WORKER_IN_PROCESS_JOB_H_

#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "common/model_layout.h"
#include "common/scheduler_client.h"
#include "scheduler/scheduler_core.h"
#include "server/server_handler.h"
#include "tests/testing/in_process_network.h"
#include "worker/ps_client.h"

namespace r2sp::testing {

struct JobWorker {
  std::unique_ptr<SchedulerClient> scheduler;
  proto::RegisterReply registration;
  std::optional<ModelLayout> layout;
  std::unique_ptr<PsClient> ps;
  std::vector<float> params;  // after Start: the initial parameters, pulled
  int rank() const { return registration.rank(); }
};

class InProcessJob {
 public:
  // `scheduler.num_workers` workers train `model` on `scheduler.num_servers` servers; each
  // worker's PsClient takes `ps` (its rank and request timeout set here).
  InProcessJob(const SchedulerOptions& scheduler, const ServerOptions& server,
               std::vector<proto::TensorSpec> model, const PsClientOptions& ps = {});
  // Ends the job if the workers have not (FINISH from each), then waits for the servers.
  ~InProcessJob();

  // Registers every node, configures the servers, and initialises the parameters to
  // `initial` (the model's size). Workers come back in rank order.
  absl::Status Start(const std::vector<float>& initial);

  std::vector<JobWorker>& workers() { return workers_; }

  // Runs fn(worker) on one thread per worker and returns the first error.
  absl::Status OnEveryWorker(const std::function<absl::Status(JobWorker&)>& fn);
  // Every worker's FINISH after the final WORKERS barrier, as a worker's end does it.
  absl::Status FinishAll();

 private:
  SchedulerClientOptions ClientOptions(const std::string& name) const;

  const SchedulerOptions scheduler_options_;
  const ServerOptions server_options_;
  const std::vector<proto::TensorSpec> model_;
  const PsClientOptions ps_options_;
  std::unique_ptr<SchedulerCore> core_;
  std::vector<std::unique_ptr<ServerHandler>> servers_;
  std::vector<std::unique_ptr<SchedulerClient>> server_clients_;
  std::vector<std::thread> server_threads_;  // each waits for its server's SHUTDOWN
  std::vector<JobWorker> workers_;
  bool finished_ = false;
  InProcessNetwork network_;  // last: stops before the handlers it calls go
};

}  // namespace r2sp::testing

#endif  // R2SP_TESTS_WORKER_IN_PROCESS_JOB_H_
