// Server replacement. A server declared dead fails the job, unless --server_replace_s allows a
// replacement (asp, ssp, r2sp and eawild; in bsp and easgd every shard completes the same rounds,
// so such a job resumes from the checkpoints instead). Then the rank waits, marked lost: heartbeats
// tell the workers to hold and retry their requests to it and nobody is declared dead for lack of
// progress meanwhile. A server that registers with the running job takes the lost rank (the lowest,
// if several), restores that rank's shard from its newest checkpoint (only that shard rolls back;
// see docs/RELIABILITY.md) and serves; the heartbeats carry its endpoint and incarnation to the
// workers. No replacement in time: the job fails as before. A replacement started as soon as its
// predecessor died registers before the death is detected: it waits, three heartbeat timeouts at
// most.
#ifndef R2SP_SCHEDULER_SERVER_REPLACEMENT_H_
#define R2SP_SCHEDULER_SERVER_REPLACEMENT_H_

#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/handler.h"
#include "scheduler/node_table.h"
#include "scheduler/waiting_registers.h"

namespace r2sp {

struct ServerReplacementOptions {
  proto::SyncMode sync = proto::ASP;
  int num_servers = 1;  // at most this many replacements wait at once
  // SchedulerOptions::server_replace_timeout (zero: servers are not replaced).
  absl::Duration replace_timeout = absl::ZeroDuration();
  absl::Duration heartbeat_timeout = absl::Seconds(3);
};

// Not thread-safe: SchedulerCore calls it under its lock.
class ServerReplacement {
 public:
  // `nodes` (borrowed; outlives this) holds the servers, lost ones marked by Node::replace_by.
  ServerReplacement(const ServerReplacementOptions& options, NodeTable* nodes);

  // How long a lost server is awaited: zero where servers are not replaced (always in bsp).
  absl::Duration timeout() const;

  // `server` was declared dead for `why`. OK: a replacement is awaited until now + timeout();
  // else the job fails with the error's message.
  absl::Status Lost(Node& server, const std::string& why, absl::Time now);
  // Whether a lost server's replacement is awaited. An error: one is overdue, and the job fails
  // with its message. `ending`: none is awaited any more.
  absl::StatusOr<bool> Awaiting(absl::Time now, bool ending);

  // A server's REGISTER with the running job; `failure`: why the job failed, or empty. The
  // server it replaces (alive again, one incarnation on), or null if it waits for a server to be
  // lost. An error, and `responder` has not been answered.
  absl::StatusOr<Node*> Replace(const proto::RegisterRequest& reg, Responder& responder,
                                absl::Time now, const std::string& failure, bool waited = false);
  // Calls `retry` for each waiting replacement that may now register again (a server was lost,
  // or it waited long enough), which takes it out of the waiting ones; `ending`: they are told
  // the job is ending.
  void AdmitWaiting(absl::Time now, bool ending, absl::FunctionRef<void(WaitingRegister&)> retry);

  // The heartbeat's news of lost and replaced servers.
  void AddNews(proto::HeartbeatReply& beat) const;

 private:
  bool AnyLost() const;

  const ServerReplacementOptions options_;
  NodeTable* const nodes_;
  WaitingRegisters waiting_;
};

}  // namespace r2sp

#endif  // R2SP_SCHEDULER_SERVER_REPLACEMENT_H_
