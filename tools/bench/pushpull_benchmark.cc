// Push/pull throughput of R2SP's worker->server path against the raw ZeroMQ transport, and
// the server's optimizer apply rate against memcpy, all in one process run over loopback.
//   bazel run -c opt //tools/bench:pushpull_benchmark [-- --reps_scale=2]
// (a) raw: a cppzmq DEALER sends one zero-copy message of the whole payload to a ROUTER,
//     which answers with a 1-byte acknowledgement; the transport's ceiling.
// (b) ours: PsClient::Push / Pull of a one-tensor model of that size to a real ServerHandler
//     behind a Transport (1 MiB partitions by default, SGD with momentum applied on arrival).
// (c) transport only: the same partitions through our Transport and framing to a handler that
//     only acknowledges, i.e. (b) without the optimizer: what the protocol itself costs.
// All of a size's measurements run interleaved, round by round, on connections set up once;
// GB/s are medians over rounds (payload bytes per second, 1 GB = 1e9 bytes; push+pull counts
// both directions) and the ratios are medians of the per-round ratios, so a noisy moment of the
// machine hits both sides of a ratio alike.
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cli.h"
#include "common/codec/fp16.h"
#include "common/model_layout.h"
#include "common/transport.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "server/server_handler.h"
#include "server/sgd.h"
#include "tools/bench/bench_util.h"
#include "worker/ps_client.h"
#include "zmq_addon.hpp"

DEFINE_double(reps_scale, 1.0, "multiply every repetition count by this");
DEFINE_uint64(partition_bytes, 1 << 20, "largest partition (the scheduler's default)");
DEFINE_int64(apply_floats, 100000000, "floats in the optimizer apply measurement");

namespace r2sp {
namespace {

int Reps(size_t bytes) {
  const int base = bytes <= (1 << 20) ? 200 : bytes <= (16 << 20) ? 30 : 8;
  return std::max(3, static_cast<int>(base * FLAGS_reps_scale));
}

void CheckOk(const absl::Status& s) { CHECK(s.ok()) << s; }

// (a) A DEALER -> ROUTER pair: Once() sends the payload as one zero-copy message and waits for
// the 1-byte acknowledgement.
class RawZmq {
 public:
  explicit RawZmq(size_t bytes)
      : bytes_(bytes), payload_(bytes, 1), router_(ctx_, zmq::socket_type::router),
        dealer_(ctx_, zmq::socket_type::dealer) {
    router_.bind("tcp://127.0.0.1:*");
    dealer_.connect(router_.get(zmq::sockopt::last_endpoint));
    receiver_ = std::thread([this] {
      for (;;) {
        std::vector<zmq::message_t> frames;
        CHECK(zmq::recv_multipart(router_, std::back_inserter(frames)));
        CHECK_EQ(frames.size(), 2u);
        if (frames[1].size() == 0) break;  // Stop()
        CHECK_EQ(frames[1].size(), bytes_);  // verify what was timed
        received_ += frames[1].size();
        router_.send(frames[0], zmq::send_flags::sndmore);
        router_.send(zmq::str_buffer("k"), zmq::send_flags::none);
      }
    });
  }
  ~RawZmq() {
    dealer_.send(zmq::message_t(), zmq::send_flags::none);
    receiver_.join();
    CHECK_EQ(received_, bytes_ * sent_);  // verify: every byte arrived
  }
  void Once() {
    zmq::message_t msg(payload_.data(), bytes_, [](void*, void*) {}, nullptr);
    dealer_.send(msg, zmq::send_flags::none);
    zmq::message_t ack;
    CHECK(dealer_.recv(ack));
    ++sent_;
  }

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
  void HandleRequest(Message request, Responder responder) override {
    CHECK_EQ(request.payload.size(), 1u);
    bytes_ += request.payload[0].size();
    responder.ReplyStatus(absl::OkStatus());
  }
  size_t bytes_ = 0;  // only touched on the server's I/O thread
};

// (c) Our transport and framing, partitions acknowledged by a handler that does nothing else.
class TransportOnly {
 public:
  explicit TransportOnly(size_t bytes) : bytes_(bytes), payload_(bytes, 1) {
    auto server = Transport::Create(TransportOptions());
    auto client = Transport::Create(TransportOptions());
    CHECK(server.ok() && client.ok());
    server_ = *std::move(server);
    client_ = *std::move(client);
    server_->Start(&ack_);
    client_->Start(nullptr);
  }
  ~TransportOnly() {
    client_->Stop();
    server_->Stop();
    CHECK_EQ(ack_.bytes_, bytes_ * sent_);  // verify: every byte arrived
  }
  void Once() {
    absl::Mutex mu;
    int left = 0;
    const size_t part = FLAGS_partition_bytes;
    for (size_t offset = 0; offset < bytes_; offset += part) {
      Message m;
      m.header.set_type(proto::PUSH);
      m.payload.push_back(BorrowedFrame(payload_.data() + offset, std::min(part, bytes_ - offset)));
      {
        absl::MutexLock lock(&mu);
        ++left;
      }
      client_->Request(server_->endpoint(), std::move(m), absl::Seconds(60),
                       [&](absl::StatusOr<Message> reply) {
                         CHECK(reply.ok()) << reply.status();
                         absl::MutexLock lock(&mu);
                         --left;
                       });
    }
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(+[](int* n) { return *n == 0; }, &left));
    ++sent_;
  }

 private:
  const size_t bytes_;
  std::vector<char> payload_;
  AckHandler ack_;
  std::unique_ptr<Transport> server_, client_;
  size_t sent_ = 0;
};

// (b) PsClient push/pull of a one-tensor model to a real ServerHandler (SGD with momentum and
// weight decay applied to every pushed partition on arrival).
class Ours {
 public:
  // `codec`: how pushes and pulls travel (fp32: zero-copy; fp16: encoded and decoded).
  explicit Ours(size_t bytes, proto::Codec codec = proto::FP32)
      : n_(bytes / sizeof(float)), codec_(codec), grads_(n_, 0.001f), params_(n_, 0.5f) {
    proto::TensorSpec tensor;
    tensor.set_name("model");
    tensor.set_num_elements(n_);
    auto layout = ModelLayout::Create({tensor}, FLAGS_partition_bytes, 1);
    CHECK(layout.ok()) << layout.status();
    layout_ = std::make_unique<ModelLayout>(*std::move(layout));
    ServerOptions options;
    options.sgd = {0.01f, 0.9f, 1e-4f};
    options.sync = proto::ASP;
    handler_ = std::make_unique<ServerHandler>(options);
    handler_->Configure(0, 1, *layout_);
    auto server = Transport::Create(TransportOptions());
    auto client = Transport::Create(TransportOptions());
    CHECK(server.ok() && client.ok());
    server_ = *std::move(server);
    client_ = *std::move(client);
    server_->Start(handler_.get());
    client_->Start(nullptr);
    PsClientOptions ps_options;
    ps_options.push_codec = codec;
    ps_ = std::make_unique<PsClient>(client_.get(), layout_.get(),
                                     std::vector<std::string>{server_->endpoint()}, ps_options);
    CheckOk(ps_->Push(params_.data(), 0, /*init=*/true).Wait());
  }
  ~Ours() {
    // Verify: what we pulled last is what the server holds, and updates were applied.
    const Partition& last = layout_->partitions().back();
    std::optional<std::vector<float>> held = handler_->Weights(last.key);
    CHECK(held.has_value());
    if (codec_ == proto::FP16) {  // pulled rounded to fp16
      for (size_t i = 0; i < last.num_elements; ++i) {
        CHECK_EQ(codec::HalfToFloat(codec::FloatToHalf((*held)[i])), params_[last.offset + i]);
      }
    } else {
      CHECK_EQ(std::memcmp(held->data(), params_.data() + last.offset, last.bytes()), 0);
    }
    CHECK_NE(params_[0], 0.5f) << "updates were not applied";
    client_->Stop();
    server_->Stop();
  }
  void Push() { CheckOk(ps_->Push(grads_.data(), 0).Wait()); }
  void Pull() {
    PullOptions options;
    options.codec = codec_;
    CheckOk(ps_->Pull(params_.data(), options).Wait());
  }
  void PushPull() {
    Push();
    Pull();
  }

 private:
  const size_t n_;
  const proto::Codec codec_;
  std::vector<float> grads_, params_;
  std::unique_ptr<ModelLayout> layout_;
  std::unique_ptr<ServerHandler> handler_;
  std::unique_ptr<Transport> server_, client_;
  std::unique_ptr<PsClient> ps_;
};

// One payload size: all five measurements interleaved round by round (bench::InterleavedSeconds),
// so that ratios compare runs taken at the same moments of a noisy machine.
struct SizeResult {
  double raw, transport, push, pull, pushpull, pushpull_fp16;  // median seconds
  double push_vs_raw, pull_vs_raw, transport_vs_raw;  // median per-round throughput ratios
  double fp16_vs_fp32;  // push+pull of the same gradient: time fp32 / time fp16, per round
};

SizeResult MeasureSize(size_t bytes) {
  RawZmq raw(bytes);
  TransportOnly transport(bytes);
  Ours ours(bytes);
  Ours fp16(bytes, proto::FP16);
  const std::vector<std::vector<double>> t = bench::InterleavedSeconds(
      2, Reps(bytes),
      {[&] { raw.Once(); }, [&] { transport.Once(); }, [&] { ours.Push(); },
       [&] { ours.Pull(); }, [&] { ours.PushPull(); }, [&] { fp16.PushPull(); }});
  SizeResult r;
  r.raw = bench::Median(t[0]);
  r.transport = bench::Median(t[1]);
  r.push = bench::Median(t[2]);
  r.pull = bench::Median(t[3]);
  r.pushpull = bench::Median(t[4]);
  r.pushpull_fp16 = bench::Median(t[5]);
  r.fp16_vs_fp32 = bench::MedianRatio(t[4], t[5]);
  // Throughput ratio ours/raw = time raw / time ours.
  r.transport_vs_raw = bench::MedianRatio(t[0], t[1]);
  r.push_vs_raw = bench::MedianRatio(t[0], t[2]);
  r.pull_vs_raw = bench::MedianRatio(t[0], t[3]);
  return r;
}

struct ApplyResult {
  double apply_seconds, memcpy_seconds;
};

ApplyResult ApplyVsMemcpy() {
  const size_t n = static_cast<size_t>(FLAGS_apply_floats);
  std::vector<float> w(n, 0.5f), m(n, 0.0f), g(n, 0.001f), dst(n, 0.0f);
  const SgdOptions sgd{0.01f, 0.9f, 1e-4f};
  ApplyResult r;
  r.apply_seconds = bench::MedianSeconds(1, 5, [&] {
    SgdApply(sgd, 1.0f, g.data(), w.data(), w.data(), m.data(), n);
  });
  r.memcpy_seconds = bench::MedianSeconds(1, 5, [&] {
    std::memcpy(dst.data(), w.data(), n * sizeof(float));
  });
  CHECK_EQ(dst[n - 1], w[n - 1]);
  return r;
}

double GBps(double bytes, double seconds) { return bytes / seconds / 1e9; }

}  // namespace
}  // namespace r2sp

int main(int argc, char** argv) {
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = 1;
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  r2sp::KeepFreedMemoryForReuse();  // as the server and worker binaries do
  using namespace r2sp;
  const size_t kMB = 1000 * 1000;
  const std::vector<size_t> sizes = {1 * kMB, 16 * kMB, 100 * kMB};
  std::printf("%-8s %9s %11s %9s %9s %14s %14s %9s %9s %11s %10s\n", "payload", "raw_zmq",
              "transport", "our_push", "our_pull", "our_push+pull", "fp16 push+pull",
              "push/zmq", "pull/zmq", "trans/zmq", "fp16/fp32");
  std::printf("%-8s %9s %11s %9s %9s %14s %14s\n", "", "GB/s", "GB/s", "GB/s", "GB/s",
              "GB/s (2 dirs)", "fp32-equiv GB/s");
  double push16 = 0, push100 = 0, pull100 = 0, pp16 = 0, pp100 = 0, trans16 = 0;
  double fp16_16 = 0, fp16_100 = 0;
  for (size_t bytes : sizes) {
    const SizeResult r = MeasureSize(bytes);
    const double pp = GBps(2.0 * bytes, r.pushpull);
    // fp16's column counts the fp32 gradient and weight bytes moved: what the job gets.
    std::printf("%-8s %9.2f %11.2f %9.2f %9.2f %14.2f %14.2f %9.2f %9.2f %11.2f %10.2f\n",
                absl::StrCat(bytes / kMB, "MB").c_str(), GBps(bytes, r.raw),
                GBps(bytes, r.transport), GBps(bytes, r.push), GBps(bytes, r.pull), pp,
                GBps(2.0 * bytes, r.pushpull_fp16), r.push_vs_raw, r.pull_vs_raw,
                r.transport_vs_raw, r.fp16_vs_fp32);
    std::fflush(stdout);
    if (bytes == 16 * kMB) {
      push16 = r.push_vs_raw, pp16 = pp, trans16 = r.transport_vs_raw, fp16_16 = r.fp16_vs_fp32;
    }
    if (bytes == 100 * kMB) {
      push100 = r.push_vs_raw, pull100 = r.pull_vs_raw, pp100 = pp, fp16_100 = r.fp16_vs_fp32;
    }
  }
  const ApplyResult apply = ApplyVsMemcpy();
  const double n_bytes = static_cast<double>(FLAGS_apply_floats) * sizeof(float);
  // SGD with momentum streams 5 arrays (read g, w, m; write w, m); memcpy streams 2.
  const double apply_bw = GBps(5 * n_bytes, apply.apply_seconds);
  const double memcpy_bw = GBps(2 * n_bytes, apply.memcpy_seconds);
  std::printf("apply: SGD+momentum over %lld floats: %.1f ms (%.2f GB/s of gradient, %.2f GB/s "
              "memory traffic); memcpy of the same bytes: %.1f ms (%.2f GB/s traffic)\n",
              static_cast<long long>(FLAGS_apply_floats), apply.apply_seconds * 1e3,
              GBps(n_bytes, apply.apply_seconds), apply_bw, apply.memcpy_seconds * 1e3,
              memcpy_bw);
  std::printf("RESULT push_vs_zmq_16MB=%.2f push_vs_zmq_100MB=%.2f pull_vs_zmq_100MB=%.2f "
              "pushpull_GBps_16MB=%.2f pushpull_GBps_100MB=%.2f apply_vs_memcpy=%.2f "
              "transport_vs_zmq_16MB=%.2f fp16_vs_fp32_pushpull_16MB=%.2f "
              "fp16_vs_fp32_pushpull_100MB=%.2f\n",
              push16, push100, pull100, pp16, pp100, apply_bw / memcpy_bw, trans16, fp16_16,
              fp16_100);
  return 0;
}
