// See checkpoint_store.h.
#include "server/checkpoint_store.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>  // paths only: the file system is the Env's
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/crc32c.h"
#include "common/durable_file.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "google/protobuf/text_format.h"

namespace r2sp {
namespace {

namespace fs = std::filesystem;

constexpr char kShardFile[] = "shard.bin";
constexpr char kManifestFile[] = "MANIFEST";
constexpr char kPrefix[] = "ckpt-";

// The sequence number of a directory named ckpt-<N>, or -1.
int64_t SequenceOf(const std::string& name) {
  int64_t seq;
  if (!absl::StartsWith(name, kPrefix) ||
      !absl::SimpleAtoi(name.substr(sizeof(kPrefix) - 1), &seq) || seq < 1) {
    return -1;
  }
  return seq;
}

absl::Status CheckIdentity(const proto::CheckpointManifest& m, const CheckpointIdentity& want) {
  if (m.layout_hash() != want.layout_hash || m.num_servers() != want.num_servers) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "it holds a different model layout (layout hash %016x over %d servers; this job's is "
        "%016x over %d)",
        m.layout_hash(), m.num_servers(), want.layout_hash, want.num_servers));
  }
  if (m.server_rank() != want.server_rank) {
    return absl::FailedPreconditionError(absl::StrCat("it is server ", m.server_rank(),
                                                      "'s shard, not server ",
                                                      want.server_rank, "'s"));
  }
  if (m.job_id() != want.job_id) {
    return absl::FailedPreconditionError(absl::StrCat(
        "it belongs to job '", m.job_id(), "', not '", want.job_id,
        "' (give the scheduler --job_id=", m.job_id(), " to resume that job)"));
  }
  if (m.sync() != want.sync) {
    return absl::FailedPreconditionError(absl::StrCat("it was taken in ", m.sync(),
                                                      " mode, this job runs ", want.sync));
  }
  return absl::OkStatus();
}

// The manifest of checkpoint `sequence` holding `shard_bytes` as its shard file.
proto::CheckpointManifest MakeManifest(const CheckpointIdentity& identity, int64_t step,
                                       int64_t sequence, const std::string& reason,
                                       const std::string& shard_bytes) {
  proto::CheckpointManifest manifest;
  manifest.set_job_id(identity.job_id);
  manifest.set_layout_hash(identity.layout_hash);
  manifest.set_server_rank(identity.server_rank);
  manifest.set_num_servers(identity.num_servers);
  manifest.set_sync(identity.sync);
  manifest.set_step(step);
  manifest.set_sequence(sequence);
  manifest.set_reason(reason);
  manifest.set_written_unix_seconds(absl::ToUnixMicros(absl::Now()) / 1e6);
  proto::CheckpointFile* file = manifest.add_files();
  file->set_name(kShardFile);
  file->set_bytes(shard_bytes.size());
  file->set_crc32c(Crc32c(shard_bytes.data(), shard_bytes.size()));
  return manifest;
}

}  // namespace

CheckpointStore::CheckpointStore(std::string dir, int rank, int keep, Env* env)
    : env_(env),
      shard_dir_((fs::path(dir) / absl::StrCat("server", rank)).string()),
      rank_(rank),
      keep_(std::max(1, keep)) {
  const std::vector<int64_t> present = Sequences();
  next_sequence_ = present.empty() ? 1 : present.back() + 1;
}

std::string CheckpointStore::PathOf(int64_t sequence) const {
  return (fs::path(shard_dir_) / absl::StrFormat("%s%08d", kPrefix, sequence)).string();
}

std::vector<int64_t> CheckpointStore::Sequences() const {
  std::vector<int64_t> out;
  const absl::StatusOr<std::vector<std::string>> names = env_->GetChildren(shard_dir_);
  for (const std::string& name : names.ok() ? *names : std::vector<std::string>()) {
    const int64_t seq = SequenceOf(name);
    if (seq > 0 && env_->IsDirectory((fs::path(shard_dir_) / name).string())) out.push_back(seq);
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<std::string> CheckpointStore::Write(const proto::ShardCheckpoint& shard,
                                                   const CheckpointIdentity& identity,
                                                   int64_t step, const std::string& reason) {
  std::string bytes;
  if (!shard.SerializeToString(&bytes)) {
    return absl::InternalError("cannot serialise the shard (over 2 GB?)");
  }
  R2SP_RETURN_IF_ERROR(env_->CreateDirs(shard_dir_));
  const int64_t sequence = next_sequence_++;
  const std::string final_path = PathOf(sequence);
  const std::string tmp =
      (fs::path(shard_dir_) / absl::StrCat(".tmp-", sequence, "-", ::getpid())).string();
  std::string text;
  google::protobuf::TextFormat::PrintToString(MakeManifest(identity, step, sequence, reason, bytes),
                                              &text);
  absl::Status written = WriteInto(tmp, bytes, text);
  if (written.ok()) written = env_->RenameFile(tmp, final_path);
  if (!written.ok()) {
    // The checkpoints already there are untouched; the half-written one goes.
    env_->RemoveAll(tmp).IgnoreError();
    return written;
  }
  R2SP_RETURN_IF_ERROR(env_->SyncDir(shard_dir_));
  Prune();
  return final_path;
}

absl::Status CheckpointStore::WriteInto(const std::string& tmp, const std::string& shard_bytes,
                                        const std::string& manifest_text) {
  R2SP_RETURN_IF_ERROR(env_->RemoveAll(tmp));
  R2SP_RETURN_IF_ERROR(env_->CreateDirs(tmp));
  R2SP_RETURN_IF_ERROR(WriteAndSync(env_, (fs::path(tmp) / kShardFile).string(), shard_bytes));
  R2SP_RETURN_IF_ERROR(WriteAndSync(env_, (fs::path(tmp) / kManifestFile).string(), manifest_text));
  return env_->SyncDir(tmp);
}

void CheckpointStore::Prune() {
  const std::vector<int64_t> present = Sequences();
  for (size_t i = 0; i + keep_ < present.size(); ++i) {
    const absl::Status removed = env_->RemoveAll(PathOf(present[i]));
    if (!removed.ok()) LOG(WARNING) << removed.message();
  }
}

absl::StatusOr<LoadedCheckpoint> CheckpointStore::Load(const std::string& path,
                                                       const CheckpointIdentity* expected) const {
  R2SP_ASSIGN_OR_RETURN(const std::string text,
                        env_->ReadFile((fs::path(path) / kManifestFile).string()));
  return Parse(
      path, text,
      [this, &path](const std::string& name) {
        return env_->ReadFile((fs::path(path) / name).string());
      },
      expected);
}

absl::StatusOr<LoadedCheckpoint> CheckpointStore::Parse(const std::string& path,
                                                        const std::string& manifest_text,
                                                        const FileReader& read,
                                                        const CheckpointIdentity* expected) {
  LoadedCheckpoint loaded;
  loaded.path = path;
  const std::string manifest_path = (fs::path(path) / kManifestFile).string();
  if (!google::protobuf::TextFormat::ParseFromString(manifest_text, &loaded.manifest)) {
    return absl::DataLossError(absl::StrCat(manifest_path, " is not a checkpoint manifest"));
  }
  if (expected != nullptr) {
    const absl::Status identity = CheckIdentity(loaded.manifest, *expected);
    if (!identity.ok()) {
      return absl::Status(identity.code(), absl::StrCat(path, ": ", identity.message()));
    }
  }
  bool have_shard = false;
  for (const proto::CheckpointFile& f : loaded.manifest.files()) {
    if (f.name() != kShardFile) continue;
    const std::string file_path = (fs::path(path) / f.name()).string();
    R2SP_ASSIGN_OR_RETURN(const std::string bytes, read(f.name()));
    if (bytes.size() != f.bytes()) {
      return absl::DataLossError(absl::StrCat(file_path, " is truncated or padded: ",
                                              bytes.size(), " bytes, the manifest says ",
                                              f.bytes()));
    }
    const uint32_t crc = Crc32c(bytes.data(), bytes.size());
    if (crc != f.crc32c()) {
      return absl::DataLossError(absl::StrFormat(
          "%s is corrupt: CRC-32C %08x, the manifest says %08x", file_path, crc, f.crc32c()));
    }
    if (!loaded.shard.ParseFromString(bytes)) {
      return absl::DataLossError(absl::StrCat(file_path, " does not parse as a shard"));
    }
    have_shard = true;
  }
  if (!have_shard) {
    return absl::DataLossError(absl::StrCat(manifest_path, " lists no ", kShardFile));
  }
  return loaded;
}

absl::StatusOr<LoadedCheckpoint> CheckpointStore::LoadLatest(
    const CheckpointIdentity& expected) const {
  std::vector<int64_t> present = Sequences();
  std::vector<std::string> skipped;
  for (auto it = present.rbegin(); it != present.rend(); ++it) {
    absl::StatusOr<LoadedCheckpoint> loaded = Load(PathOf(*it), &expected);
    if (loaded.ok()) {
      loaded->skipped = std::move(skipped);
      return loaded;
    }
    LOG(WARNING) << "checkpoint passed over: " << loaded.status().message();
    skipped.push_back(std::string(loaded.status().message()));
  }
  if (skipped.empty()) {
    return absl::NotFoundError(absl::StrCat("no checkpoint of server ", rank_, " in ",
                                            shard_dir_));
  }
  return absl::NotFoundError(absl::StrCat("no usable checkpoint of server ", rank_, " in ",
                                          shard_dir_, ": ", absl::StrJoin(skipped, "; ")));
}

}  // namespace r2sp
