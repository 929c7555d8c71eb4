// Where a server's checkpoints of its shard live and how they are written and read back:
// DIR/server<R>/ckpt-<sequence>/ holds shard.bin (proto ShardCheckpoint) and MANIFEST (proto
// CheckpointManifest, text format: job id, layout hash, rank, step, each file's size and
// CRC-32C). A checkpoint is written into a temporary directory, every file and the directory
// fsynced, then renamed into place, so a crash leaves either the whole checkpoint or none; the
// newest `keep` are kept. A write that fails (a failed fsync, a torn write, a full disk, a
// failed rename) returns the Env's error naming the file and the operation, removes its
// temporary directory and leaves the checkpoints already there untouched. Loading takes the
// newest checkpoint that verifies, and says, naming the file, why each newer one was passed
// over (truncated, bit-flipped, another job's). All file access goes through an Env
// (common/env.h), so tests can inject faults.
#ifndef R2SP_SERVER_CHECKPOINT_STORE_H_
#define R2SP_SERVER_CHECKPOINT_STORE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "proto/checkpoint.pb.h"

namespace r2sp {

// What a checkpoint must match to be restored.
struct CheckpointIdentity {
  std::string job_id;
  uint64_t layout_hash = 0;
  int server_rank = 0;
  int num_servers = 1;
  std::string sync;  // the job's --sync: bsp, ssp, asp, r2sp, easgd or eawild
};

struct LoadedCheckpoint {
  std::string path;  // the checkpoint's directory
  proto::CheckpointManifest manifest;
  proto::ShardCheckpoint shard;
  // Newer checkpoints that did not verify, each with why (empty when the newest was good).
  std::vector<std::string> skipped;
};

// Not thread-safe: one writer (the server's checkpoint thread).
class CheckpointStore {
 public:
  // Checkpoints of server `rank` under `dir` (in DIR/server<R>), read and written through
  // `env` (borrowed; it outlives this object); `keep` >= 1.
  CheckpointStore(std::string dir, int rank, int keep, Env* env = Env::Default());

  // Writes `shard` as the next checkpoint and prunes older ones; returns its directory.
  absl::StatusOr<std::string> Write(const proto::ShardCheckpoint& shard,
                                    const CheckpointIdentity& identity, int64_t step,
                                    const std::string& reason);

  // The newest checkpoint that verifies against `expected`. NotFound if there is none, with
  // every rejected checkpoint and why in the message.
  absl::StatusOr<LoadedCheckpoint> LoadLatest(const CheckpointIdentity& expected) const;

  // Reads and verifies one checkpoint directory (`expected` may be null: no identity check).
  absl::StatusOr<LoadedCheckpoint> Load(const std::string& path,
                                        const CheckpointIdentity* expected) const;

  // Load's verification of contents already read: the manifest's text, and the files it lists
  // through `read` (given a file's name, its bytes). `path` names the checkpoint in errors.
  using FileReader = std::function<absl::StatusOr<std::string>(const std::string& name)>;
  static absl::StatusOr<LoadedCheckpoint> Parse(const std::string& path,
                                                const std::string& manifest_text,
                                                const FileReader& read,
                                                const CheckpointIdentity* expected);

  // Sequence numbers of the checkpoints present, ascending.
  std::vector<int64_t> Sequences() const;

 private:
  std::string PathOf(int64_t sequence) const;
  // Writes a checkpoint's files into directory `tmp` (made afresh) and fsyncs it.
  absl::Status WriteInto(const std::string& tmp, const std::string& shard_bytes,
                         const std::string& manifest_text);
  void Prune();

  Env* const env_;
  const std::string shard_dir_;
  const int rank_;
  const int keep_;
  int64_t next_sequence_;
};

}  // namespace r2sp

#endif  // R2SP_SERVER_CHECKPOINT_STORE_H_
