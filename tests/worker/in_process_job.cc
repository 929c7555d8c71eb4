// See in_process_job.h.
#include "tests/worker/in_process_job.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"

namespace r2sp::testing {

InProcessJob::InProcessJob(const SchedulerOptions& scheduler, const ServerOptions& server,
                           std::vector<proto::TensorSpec> model, const PsClientOptions& ps)
    : scheduler_options_(scheduler),
      server_options_(server),
      model_(std::move(model)),
      ps_options_(ps) {
  core_ = std::make_unique<SchedulerCore>(scheduler_options_, network_.Client("scheduler"));
  network_.Serve("scheduler", core_.get());
}

InProcessJob::~InProcessJob() {
  if (!finished_ && !workers_.empty()) FinishAll().IgnoreError();
  for (std::thread& t : server_threads_) t.join();
}

SchedulerClientOptions InProcessJob::ClientOptions(const std::string& name) const {
  SchedulerClientOptions options;
  options.scheduler = "scheduler";
  options.endpoint = name;
  options.register_timeout = absl::Seconds(20);
  options.barrier_timeout = absl::Seconds(60);
  return options;
}

absl::Status InProcessJob::OnEveryWorker(const std::function<absl::Status(JobWorker&)>& fn) {
  absl::Mutex mu;
  absl::Status first;
  std::vector<std::thread> threads;
  for (JobWorker& w : workers_) {
    threads.emplace_back([&, &w = w] {
      absl::Status s = fn(w);
      absl::MutexLock lock(&mu);
      if (first.ok() && !s.ok()) first = WithContext(s, absl::StrCat("worker ", w.rank()));
    });
  }
  for (std::thread& t : threads) t.join();
  return first;
}

absl::Status InProcessJob::Start(const std::vector<float>& initial) {
  const int num_servers = scheduler_options_.num_servers;
  const int num_workers = scheduler_options_.num_workers;
  // Every node registers at once: the rendezvous answers when all have.
  std::vector<absl::StatusOr<proto::RegisterReply>> server_regs(num_servers);
  std::vector<std::unique_ptr<SchedulerClient>> worker_clients(num_workers);
  std::vector<absl::StatusOr<proto::RegisterReply>> worker_regs(num_workers);
  std::vector<std::thread> registering;
  // Every client before any thread: a push_back that grows server_clients_ would move the
  // clients under a registering thread's feet (ThreadSanitizer saw it).
  for (int s = 0; s < num_servers; ++s) {
    const std::string name = absl::StrCat("server", s);
    server_clients_.push_back(
        std::make_unique<SchedulerClient>(network_.Client(name), ClientOptions(name)));
  }
  for (int s = 0; s < num_servers; ++s) {
    registering.emplace_back([this, s, &server_regs] {
      server_regs[s] = server_clients_[s]->Register(proto::SERVER, {});
    });
  }
  for (int w = 0; w < num_workers; ++w) {
    const std::string name = absl::StrCat("worker", w);
    worker_clients[w] =
        std::make_unique<SchedulerClient>(network_.Client(name), ClientOptions(name));
    registering.emplace_back([this, w, &worker_clients, &worker_regs] {
      worker_regs[w] = worker_clients[w]->Register(proto::WORKER, model_);
    });
  }
  for (std::thread& t : registering) t.join();

  servers_.resize(num_servers);
  for (int s = 0; s < num_servers; ++s) {
    R2SP_RETURN_IF_ERROR_WITH(server_regs[s].status(), "server registration");
    const proto::AddressBook& book = server_regs[s]->book();
    const int rank = server_regs[s]->rank();
    R2SP_ASSIGN_OR_RETURN(ModelLayout layout,
                          ModelLayout::Create(model_, book.partition_bytes(), num_servers));
    ServerOptions options = server_options_;
    options.sync = book.sync();
    servers_[rank] = std::make_unique<ServerHandler>(options);
    ServerPeers peers;
    peers.scheduler_id = server_regs[s]->scheduler_id();
    for (const proto::NodeInfo& w : book.workers()) peers.worker_ids.push_back(w.routing_id());
    servers_[rank]->Configure(rank, peers, layout);
    network_.Serve(book.servers(rank).endpoint(), servers_[rank].get());
    ServerHandler* handler = servers_[rank].get();
    SchedulerClient* client = server_clients_[s].get();
    server_threads_.emplace_back([handler, client] {
      if (client->Barrier(proto::ALL).ok()) handler->shutdown_requested().WaitForNotification();
    });
  }
  // In rank order; the vector is sized once, so each layout stays where its PsClient points.
  workers_.resize(num_workers);
  for (int w = 0; w < num_workers; ++w) {
    R2SP_RETURN_IF_ERROR_WITH(worker_regs[w].status(), "worker registration");
    JobWorker& worker = workers_[worker_regs[w]->rank()];
    worker.scheduler = std::move(worker_clients[w]);
    worker.registration = *worker_regs[w];
    const proto::AddressBook& book = worker.registration.book();
    R2SP_ASSIGN_OR_RETURN(worker.layout,
                          ModelLayout::Create(model_, book.partition_bytes(), num_servers));
    std::vector<std::string> endpoints;
    for (const proto::NodeInfo& n : book.servers()) endpoints.push_back(n.endpoint());
    PsClientOptions ps_options = ps_options_;
    ps_options.rank = worker.rank();
    ps_options.request_timeout = absl::Seconds(30);
    worker.ps = std::make_unique<PsClient>(network_.Client(absl::StrCat("worker", w)),
                                           &*worker.layout, endpoints, ps_options);
  }
  return OnEveryWorker([&initial](JobWorker& w) -> absl::Status {
    w.params.assign(w.layout->total_elements(), 0.0f);
    R2SP_RETURN_IF_ERROR(w.scheduler->Barrier(proto::ALL));
    if (w.rank() == 0) {
      R2SP_RETURN_IF_ERROR(w.ps->Push(initial.data(), 0, /*init=*/true).Wait());
    }
    R2SP_RETURN_IF_ERROR(w.scheduler->Barrier(proto::WORKERS));
    return w.ps->Pull(w.params.data()).Wait();
  });
}

absl::Status InProcessJob::FinishAll() {
  finished_ = true;
  return OnEveryWorker([](JobWorker& w) -> absl::Status {
    R2SP_RETURN_IF_ERROR(w.scheduler->Barrier(proto::WORKERS));
    return w.scheduler->Finish(proto::NodeCounters());
  });
}

}  // namespace r2sp::testing
