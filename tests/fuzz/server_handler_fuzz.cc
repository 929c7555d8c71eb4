// Fuzz target: the parameter server's protocol logic (server/server_handler.h) fed whatever
// arrives, as the transport feeds it: frames through DecodeFrames, then HandleRequest; between
// messages, the clock moves, OnTick runs, workers depart, and a snapshot of the shard must
// restore into a fresh handler. Input: an options byte (mode, momentum, per-sample updates,
// workers), then operations (fuzz_input.h).
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/message.h"
#include "common/model_layout.h"
#include "glog/logging.h"
#include "server/server_handler.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/testing/fakes.h"

namespace r2sp::fuzz {
namespace {

// The construction against the handler's API (Configure with the peers' routing ids,
// Responder with the role CURVE authenticated): the one place to adapt when it changes.
std::unique_ptr<ServerHandler> MakeHandler(const ServerOptions& options, int num_workers,
                                           const ModelLayout& layout, ServerHandler::Clock clock) {
  auto handler = std::make_unique<ServerHandler>(options, std::move(clock));
  ServerPeers peers;
  peers.scheduler_id = "scheduler";
  for (int w = 0; w < num_workers; ++w) peers.worker_ids.push_back("w" + std::to_string(w));
  handler->Configure(/*rank=*/0, peers, layout);
  return handler;
}
Responder MakeResponder(ReplySink* sink, const std::string& routing_id, const proto::Header& header,
                        proto::Role authenticated_role) {
  return Responder(sink, routing_id, header, authenticated_role);
}

// Four partitions on server 0: three of 3 floats ("w" cut in three), one of 2 ("b").
const ModelLayout& Layout() {
  static const ModelLayout* layout = [] {
    proto::TensorSpec w, b;
    w.set_name("w");
    w.set_num_elements(9);
    b.set_name("b");
    b.set_num_elements(2);
    return new ModelLayout(*ModelLayout::Create({w, b}, /*partition_bytes=*/16, 1));
  }();
  return *layout;
}

const char* const kPeers[] = {"w0", "w1", "w2", "scheduler"};

// Every reply answers a request: the transport sends it as it is.
void CheckReplies(testing::RecordingSink& sink) {
  for (auto& [routing_id, reply] : sink.Take()) {
    CHECK(reply.header.is_reply());
    CHECK_EQ(static_cast<size_t>(reply.header.payload_bytes_size()), 0u)
        << "payload sizes are the transport's to fill in";
  }
}

// A snapshot of an initialised shard restores into a fresh handler, to the same weights.
void CheckSnapshotRestores(const ServerHandler& handler, const ServerOptions& options,
                           int num_workers) {
  if (!handler.Initialized()) return;
  const proto::ShardCheckpoint shard = handler.Snapshot();
  std::unique_ptr<ServerHandler> fresh =
      MakeHandler(options, num_workers, Layout(), [] { return absl::UnixEpoch(); });
  const absl::Status restored = fresh->Restore(shard);
  CHECK(restored.ok()) << restored;
  for (const Partition& p : Layout().partitions()) {
    const std::vector<float> a = *fresh->Weights(p.key), b = *handler.Weights(p.key);
    CHECK(a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0)
        << "partition " << p.key;  // bytes: NaN weights compare unequal
  }
}

}  // namespace
}  // namespace r2sp::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace r2sp;
  fuzz::FuzzInput in(data, size);
  const uint8_t config = in.Byte();
  static constexpr proto::SyncMode kModes[] = {proto::ASP,    proto::BSP,   proto::SSP,
                                               proto::R2SP,   proto::EAWILD, proto::EASGD};
  ServerOptions options;
  // Bit 4 (per-sample updates off, which elastic modes ignore) turns asp into eawild and bsp
  // into easgd.
  options.sync = kModes[(config & 3) + ((config & 16) != 0 && (config & 3) < 2 ? 4 : 0)];
  options.elastic_period = 2;
  options.sgd = {0.1f, (config & 4) ? 0.9f : 0.0f, (config & 8) ? 0.01f : 0.0f};
  options.per_sample_updates = (config & 16) == 0;
  const int num_workers = 1 + (config >> 5) % 3;
  absl::Time now = absl::FromUnixSeconds(1000);
  testing::RecordingSink sink;
  std::unique_ptr<ServerHandler> handler =
      fuzz::MakeHandler(options, num_workers, fuzz::Layout(), [&now] { return now; });
  for (int ops = 0; ops < 64 && !in.empty(); ++ops) {
    const uint8_t op = in.Byte();
    switch (op % 8) {
      case 5:
        now += absl::Milliseconds(in.U16());
        handler->OnTick(now);
        break;
      case 6:
        handler->SetDepartedWorkers({static_cast<int>(in.Byte() % 4) - 1});
        break;
      case 7:
        fuzz::CheckSnapshotRestores(*handler, options, num_workers);
        break;
      default: {
        const std::string peer = fuzz::kPeers[(op >> 3) % 4];
        std::vector<zmq::message_t> frames = fuzz::TakeFrames(in);
        absl::StatusOr<Message> request = DecodeFrames(frames, DecodeLimits());
        if (!request.ok()) break;
        // Without CURVE, or (op's top bit) with the role the peer's key proved.
        const proto::Role role =
            (op & 0x80) != 0 ? static_cast<proto::Role>(in.Byte() % 4) : proto::ROLE_UNSPECIFIED;
        Responder responder = fuzz::MakeResponder(&sink, peer, request->header, role);
        handler->HandleRequest(*std::move(request), std::move(responder));
      }
    }
    fuzz::CheckReplies(sink);
  }
  return 0;
}
