// A parameter server's life in the job: bind, register with the scheduler, build the handler
// for the job's mode and model layout from the address book (and, resuming or replacing a lost
// server of a running job, restore its shard from its newest good checkpoint), pass the ALL
// barrier (not a replacement), serve pushes and pulls (checkpointing
// as --checkpoint_every says) until the scheduler sends SHUTDOWN, or until it must stop (a
// signal, the scheduler lost, the job failed), and stop with a last checkpoint.
#ifndef R2SP_SERVER_SERVER_NODE_H_
#define R2SP_SERVER_SERVER_NODE_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/model_layout.h"
#include "common/scheduler_client.h"
#include "common/transport.h"
#include "proto/messages.pb.h"
#include "common/node_connection.h"
#include "server/checkpointer.h"
#include "server/server_handler.h"

namespace r2sp {

// A server's options: the components' own, nested (server/main.cc fills them from flags).
struct ServerNodeOptions {
  NodeConnectionOptions connection;
  // Optimizer, schedule and per-sample updates; `sync` is ignored: the job's mode comes from
  // the scheduler's address book.
  ServerOptions server;
  // checkpoint.dir empty: no checkpoints. REQUIRES: keep >= 1, every_time and every_steps
  // >= 0.
  CheckpointPolicy checkpoint;
  bool resume = false;  // restore the shard from checkpoint.dir first. REQUIRES: a dir

  // OK, or InvalidArgument naming the first field (and its flag) that breaks a REQUIRES, the
  // nested structs' included.
  absl::Status Validate() const;
};

// Thread-compatible: one thread calls Run(); the transport's I/O thread and the heartbeat
// thread work inside it.
class ServerNode {
 public:
  explicit ServerNode(ServerNodeOptions options);
  ~ServerNode();

  // The whole life; returns OK once the scheduler has shut this server down, or the first
  // error (invalid options, binding, registration, the layout, the barrier).
  absl::Status Run();

  // What this server did (zero before Run()).
  proto::NodeCounters counters() const;

  // Asks the server to stop before the job ends (thread-safe; the first call counts): it
  // checkpoints and Run() returns an error saying `why`; the process should then exit with
  // `exit_status`. Returns false if it does not serve yet (there is nothing to checkpoint, and
  // Run() may be blocked registering or at the first barrier): the caller then decides,
  // main() by exiting at once.
  bool Stop(const std::string& why, int exit_status) ABSL_LOCKS_EXCLUDED(stop_mu_);
  // The status the process should exit with after Run() returned an error.
  int exit_status() const ABSL_LOCKS_EXCLUDED(stop_mu_);

 private:
  // Bind, register, configure the handler, start heartbeats, wait for every node to be ready.
  absl::Status Join();
  // options_.server.apply_threads, or with auto the count AutoApplyThreads picks for this
  // server's partitions of `layout`, the cores and the I/O threads (logged).
  int ApplyThreadsFor(const ModelLayout& layout) const;
  // Sets up checkpoints and, with `restore` (resuming, or replacing a lost server), restores
  // the shard from its newest good checkpoint.
  absl::Status PrepareCheckpoints(const proto::AddressBook& book, const ModelLayout& layout,
                                  bool restore);
  // Serve until SHUTDOWN or Stop(), then stop heartbeats and the transport, and checkpoint.
  absl::Status Serve();

  const ServerNodeOptions options_;
  // The handler is called by the transport's I/O thread (requests, heartbeat replies), so
  // ~ServerNode stops heartbeats and the transport before any of these goes.
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<ServerHandler> handler_;
  std::unique_ptr<SchedulerClient> scheduler_;
  std::unique_ptr<Checkpointer> checkpointer_;
  int rank_ = -1;

  mutable absl::Mutex stop_mu_;
  bool serving_ ABSL_GUARDED_BY(stop_mu_) = false;
  std::string stop_reason_ ABSL_GUARDED_BY(stop_mu_);
  int exit_status_ ABSL_GUARDED_BY(stop_mu_) = 1;
  absl::Notification stop_;
};

}  // namespace r2sp

#endif  // R2SP_SERVER_SERVER_NODE_H_
