// A parameter server's life in the job: bind, register with the scheduler, build the handler
// for the job's mode and model layout from the address book, pass the ALL barrier, serve
// pushes and pulls until the scheduler sends SHUTDOWN, and stop.
#ifndef R2SP_SERVER_SERVER_NODE_H_
#define R2SP_SERVER_SERVER_NODE_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/scheduler_client.h"
#include "common/transport.h"
#include "proto/messages.pb.h"
#include "common/node_connection.h"
#include "server/server_handler.h"

namespace r2sp {

// The server's flags (server/main.cc says what each means).
struct ServerNodeOptions {
  NodeConnectionOptions connection;
  // Optimizer, schedule and per-sample updates; `sync` is ignored: the job's mode comes from
  // the scheduler's address book.
  ServerOptions server;
};

// Thread-compatible: one thread calls Run(); the transport's I/O thread and the heartbeat
// thread work inside it.
class ServerNode {
 public:
  explicit ServerNode(ServerNodeOptions options);
  ~ServerNode();

  // The whole life; returns OK once the scheduler has shut this server down, or the first
  // error (binding, registration, the layout, the barrier).
  absl::Status Run();

  // What this server did (zero before Run()).
  proto::NodeCounters counters() const;

 private:
  // Bind, register, configure the handler, start heartbeats, wait for every node to be ready.
  absl::Status Join();
  // Serve until SHUTDOWN, then stop heartbeats and the transport.
  void Serve();

  const ServerNodeOptions options_;
  // The handler is called by the transport's I/O thread (requests, heartbeat replies), so
  // ~ServerNode stops heartbeats and the transport before any of these goes.
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<ServerHandler> handler_;
  std::unique_ptr<SchedulerClient> scheduler_;
  int rank_ = -1;
};

}  // namespace r2sp

#endif  // R2SP_SERVER_SERVER_NODE_H_
