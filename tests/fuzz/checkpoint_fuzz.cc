// Fuzz target: reading a server's checkpoint back (server/checkpoint_store.h Parse, the part
// of Load after the files are read: the text manifest, the identity check, size and CRC-32C of
// shard.bin, the shard's protobuf), then restoring what verifies into a server's handler
// (ServerHandler::Restore), which must refuse a shard that does not fit its layout without
// changing anything. Input: a mode byte, the manifest as a chunk (fuzz_input.h), the rest
// shard.bin. Mode bit 0: append a files entry with shard.bin's true size and CRC (so inputs
// get past the checksum); bit 1: check the identity.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/model_layout.h"
#include "glog/logging.h"
#include "server/checkpoint_store.h"
#include "server/server_handler.h"
#include "tests/fuzz/fuzz_input.h"

namespace r2sp::fuzz {
namespace {

// The construction against the handler's API (Configure with the peers' routing ids): the one
// place to adapt when it changes.
std::unique_ptr<ServerHandler> MakeHandler(const ServerOptions& options, int num_workers,
                                           const ModelLayout& layout) {
  auto handler = std::make_unique<ServerHandler>(options);
  ServerPeers peers;
  peers.scheduler_id = "scheduler";
  for (int w = 0; w < num_workers; ++w) peers.worker_ids.push_back("w" + std::to_string(w));
  handler->Configure(/*rank=*/0, peers, layout);
  return handler;
}

// Server 0 of 2: "w" (6 floats) in partitions of 2; the seeds' checkpoints are of this layout.
const ModelLayout& Layout() {
  static const ModelLayout* layout = [] {
    proto::TensorSpec w;
    w.set_name("w");
    w.set_num_elements(6);
    return new ModelLayout(*ModelLayout::Create({w}, /*partition_bytes=*/8, 2));
  }();
  return *layout;
}

CheckpointIdentity Identity() {
  CheckpointIdentity id;
  id.job_id = "fuzz";
  id.layout_hash = Layout().Hash();
  id.server_rank = 0;
  id.num_servers = 2;
  id.sync = "bsp";
  return id;
}

}  // namespace
}  // namespace r2sp::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace r2sp;
  fuzz::FuzzInput in(data, size);
  const uint8_t mode = in.Byte();
  std::string manifest(in.Chunk());
  const std::string shard(in.Rest());
  if ((mode & 1) != 0) {
    absl::StrAppend(&manifest, "\nfiles { name: \"shard.bin\" bytes: ", shard.size(),
                    " crc32c: ", Crc32c(shard.data(), shard.size()), " }\n");
  }
  const CheckpointIdentity identity = fuzz::Identity();
  absl::StatusOr<LoadedCheckpoint> loaded = CheckpointStore::Parse(
      "ckpt", manifest,
      [&shard](const std::string& name) -> absl::StatusOr<std::string> {
        CHECK_EQ(name, "shard.bin") << "Parse reads only the files it knows";
        return shard;
      },
      (mode & 2) != 0 ? &identity : nullptr);
  if (!loaded.ok()) return 0;
  ServerOptions options;
  options.sync = proto::BSP;
  options.sgd.momentum = 0.9f;
  std::unique_ptr<ServerHandler> handler = fuzz::MakeHandler(options, 2, fuzz::Layout());
  const proto::ShardCheckpoint before = handler->Snapshot();
  if (!handler->Restore(loaded->shard).ok()) {
    CHECK_EQ(handler->Snapshot().SerializeAsString(), before.SerializeAsString())
        << "a refused restore changed the shard";
    return 0;
  }
  CHECK(handler->Initialized());
  return 0;
}
