// The three worker->server paths pushpull_benchmark times, over loopback in one process. Each
// verifies in its destructor what was timed (CHECK-fails if a byte or an update went missing).
// Not thread-safe: one caller drives each setup.
#ifndef R2SP_TOOLS_BENCH_PUSHPULL_SETUPS_H_
#define R2SP_TOOLS_BENCH_PUSHPULL_SETUPS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/auth/curve_keys.h"
#include "common/codec/codec_spec.h"
#include "common/handler.h"
#include "common/model_layout.h"
#include "common/transport.h"
#include "server/server_handler.h"
#include "worker/ps_client.h"
#include "zmq.hpp"

namespace r2sp::bench {

// (a) A DEALER -> ROUTER pair: Once() sends the payload as one zero-copy message and waits for
// the 1-byte acknowledgement; the transport's ceiling.
class RawZmq {
 public:
  explicit RawZmq(size_t bytes);
  ~RawZmq();
  void Once();

 private:
  const size_t bytes_;
  std::vector<char> payload_;
  zmq::context_t ctx_{1};
  zmq::socket_t router_, dealer_;
  std::thread receiver_;
  size_t received_ = 0;  // receiver thread only; read after join
  size_t sent_ = 0;
};

// Acknowledges every request without touching its payload.
class AckHandler : public RequestHandler {
 public:
  void HandleRequest(Message request, Responder responder) override;
  size_t bytes() const { return bytes_; }  // read after the server stopped

 private:
  size_t bytes_ = 0;  // only touched on the server's I/O thread
};

// (c) Our transport and framing: the payload in partitions of at most `partition_bytes`,
// acknowledged by a handler that does nothing else.
class TransportOnly {
 public:
  TransportOnly(size_t bytes, size_t partition_bytes);
  ~TransportOnly();
  void Once();

 private:
  const size_t bytes_, partition_bytes_;
  std::vector<char> payload_;
  AckHandler ack_;
  std::unique_ptr<Transport> server_, client_;
  size_t sent_ = 0;
};

// (b) PsClient push/pull of a one-tensor model to a real ServerHandler (SGD with momentum and
// weight decay applied to every pushed partition on arrival).
class Ours {
 public:
  // `push_codec`: how gradients travel (fp32: zero-copy; the others encoded by the client;
  // sparse ones with error feedback). Pulls are fp16 for fp16, fp32 otherwise. `grads`
  // (borrowed; outlives this) is what every push sends. With `curve` (every role's keys, from
  // GenerateJobKeys), the worker and server speak CURVE as with --auth=curve, each with
  // `io_threads` ZeroMQ I/O threads and the worker with `connections` to the server
  // (--io_threads, --connections_per_peer).
  Ours(const std::vector<float>& grads, const codec::CodecSpec& push_codec, size_t partition_bytes,
       const absl::flat_hash_map<int, JobKeys>* curve = nullptr, int io_threads = 1,
       int connections = 1);
  ~Ours();
  void Push();
  void Pull();
  void PushPull() {
    Push();
    Pull();
  }
  // The gradient pushes' wire bytes over fp32's (initial values left out); 1 before any push.
  double WireFraction() const;

 private:
  const size_t n_;
  const codec::CodecSpec push_codec_;
  const proto::Codec pull_codec_;
  const std::vector<float>& grads_;
  std::vector<float> params_;
  uint64_t pushes_ = 0;
  bool pushed_since_pull_ = false;
  std::unique_ptr<ModelLayout> layout_;
  std::unique_ptr<ServerHandler> handler_;
  std::unique_ptr<Transport> server_, client_;
  std::unique_ptr<PsClient> ps_;
};

}  // namespace r2sp::bench

#endif  // R2SP_TOOLS_BENCH_PUSHPULL_SETUPS_H_
