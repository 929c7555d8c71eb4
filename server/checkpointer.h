// When a server checkpoints its shard: every --checkpoint_every (seconds or global-batch
// steps) on a thread of its own, and on demand (SIGTERM, the scheduler lost, the end of the
// job). The snapshot is taken between two requests (ServerHandler::Snapshot; by steps, by the
// request that reaches the due step: ServerHandler::SnapshotAtSteps); the write
// (CheckpointStore, through the policy's Env) runs off the I/O thread, so serving goes on while
// a checkpoint is written.
#ifndef R2SP_SERVER_CHECKPOINTER_H_
#define R2SP_SERVER_CHECKPOINTER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "server/checkpoint_store.h"
#include "server/server_handler.h"

namespace r2sp {

struct CheckpointPolicy {
  std::string dir;           // empty: no checkpoints
  absl::Duration every_time = absl::ZeroDuration();  // zero: not by time
  int64_t every_steps = 0;   // 0: not by steps
  int keep = 3;
  // Where checkpoints are written and read (borrowed; outlives the Checkpointer): the POSIX
  // file system unless a test injects faults.
  Env* env = Env::Default();
};

// Parses --checkpoint_every: "" (never periodically), "<N>s" (seconds, N > 0, may have a
// fraction) or "<N>steps" (global-batch steps, N >= 1), into `policy`.
absl::Status ParseCheckpointEvery(const std::string& spec, CheckpointPolicy* policy);

// Thread-safe.
class Checkpointer {
 public:
  // `handler` (borrowed) outlives this object. REQUIRES: !policy.dir.empty().
  Checkpointer(const CheckpointPolicy& policy, ServerHandler* handler,
               CheckpointIdentity identity);
  ~Checkpointer();

  // Starts the periodic checkpoints, if the policy has any.
  void Start();
  // Stops them (waits for a write in progress).
  void Stop();
  // Writes a checkpoint now; returns its directory.
  absl::StatusOr<std::string> CheckpointNow(const std::string& reason) ABSL_LOCKS_EXCLUDED(mu_);

  const CheckpointIdentity& identity() const { return identity_; }
  CheckpointStore& store() { return store_; }

 private:
  void Loop();
  // The global-batch steps a snapshot holds (its least advanced partition's).
  static double ShardSteps(const proto::ShardCheckpoint& shard);
  // Writes `shard`, taken at `start`: a periodic checkpoint by time counts from it, and a step
  // snapshot older than it is not written after it.
  absl::StatusOr<std::string> WriteLocked(const proto::ShardCheckpoint& shard,
                                          const std::string& reason, absl::Time start)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CheckpointPolicy policy_;
  ServerHandler* const handler_;
  const CheckpointIdentity identity_;
  absl::Notification stop_;
  std::thread thread_;
  absl::Mutex mu_;  // one write at a time
  CheckpointStore store_ ABSL_GUARDED_BY(mu_);
  absl::Time last_time_ ABSL_GUARDED_BY(mu_);
  double last_steps_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace r2sp

#endif  // R2SP_SERVER_CHECKPOINTER_H_
