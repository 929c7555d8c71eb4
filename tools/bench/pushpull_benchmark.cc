// Push/pull throughput of R2SP's worker->server path against the raw ZeroMQ transport, and
// the server's optimizer apply rate against memcpy, all in one process run over loopback.
//   bazel run -c opt //tools/bench:pushpull_benchmark [-- --reps_scale=2]
// (a) raw: a cppzmq DEALER sends one zero-copy message of the whole payload to a ROUTER,
//     which answers with a 1-byte acknowledgement; the transport's ceiling.
// (b) ours: PsClient::Push / Pull of a one-tensor model of that size to a real ServerHandler
//     behind a Transport (1 MiB partitions by default, SGD with momentum applied on arrival).
// (c) transport only: the same partitions through our Transport and framing to a handler that
//     only acknowledges, i.e. (b) without the optimizer: what the protocol itself costs.
// GB/s are payload bytes per second, 1 GB = 1e9 bytes; push+pull counts both directions.
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
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

double RawZmqSeconds(size_t bytes) {
  zmq::context_t ctx(1);
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.bind("tcp://127.0.0.1:*");
  const std::string endpoint = router.get(zmq::sockopt::last_endpoint);
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.connect(endpoint);
  std::vector<char> payload(bytes, 1);
  const int reps = Reps(bytes);
  const int total = reps + 2;
  std::thread receiver([&] {
    for (int i = 0; i < total; ++i) {
      std::vector<zmq::message_t> frames;
      CHECK(zmq::recv_multipart(router, std::back_inserter(frames)));
      CHECK_EQ(frames.size(), 2u);
      CHECK_EQ(frames[1].size(), bytes);  // verify what was timed
      router.send(frames[0], zmq::send_flags::sndmore);
      router.send(zmq::str_buffer("k"), zmq::send_flags::none);
    }
  });
  const double seconds = bench::MedianSeconds(2, reps, [&] {
    zmq::message_t msg(payload.data(), bytes, [](void*, void*) {}, nullptr);
    dealer.send(msg, zmq::send_flags::none);
    zmq::message_t ack;
    CHECK(dealer.recv(ack));
  });
  receiver.join();
  return seconds;
}

void CheckOk(const absl::Status& s) { CHECK(s.ok()) << s; }

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

double TransportOnlySeconds(size_t bytes) {
  AckHandler ack;
  auto server = Transport::Create(TransportOptions());
  auto client = Transport::Create(TransportOptions());
  CHECK(server.ok() && client.ok());
  (*server)->Start(&ack);
  (*client)->Start(nullptr);
  std::vector<char> payload(bytes, 1);
  const size_t part = FLAGS_partition_bytes;
  const int reps = Reps(bytes);
  const double seconds = bench::MedianSeconds(2, reps, [&] {
    absl::Mutex mu;
    int left = 0;
    for (size_t offset = 0; offset < bytes; offset += part) {
      Message m;
      m.header.set_type(proto::PUSH);
      m.payload.push_back(BorrowedFrame(payload.data() + offset, std::min(part, bytes - offset)));
      {
        absl::MutexLock lock(&mu);
        ++left;
      }
      (*client)->Request((*server)->endpoint(), std::move(m), absl::Seconds(60),
                         [&](absl::StatusOr<Message> reply) {
                           CHECK(reply.ok()) << reply.status();
                           absl::MutexLock lock(&mu);
                           --left;
                         });
    }
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(+[](int* n) { return *n == 0; }, &left));
  });
  (*client)->Stop();
  (*server)->Stop();
  CHECK_EQ(ack.bytes_, bytes * (reps + 2));  // verify: every byte arrived
  return seconds;
}

struct OursResult {
  double push, pull, pushpull;
};

OursResult OursSeconds(size_t bytes) {
  const size_t n = bytes / sizeof(float);
  proto::TensorSpec tensor;
  tensor.set_name("model");
  tensor.set_num_elements(n);
  auto layout = ModelLayout::Create({tensor}, FLAGS_partition_bytes, 1);
  CHECK(layout.ok()) << layout.status();
  ServerOptions options;
  options.sgd = {0.01f, 0.9f, 1e-4f};
  options.sync = proto::ASP;
  ServerHandler handler(options);
  handler.Configure(0, 1, *layout);
  auto server = Transport::Create(TransportOptions());
  auto client = Transport::Create(TransportOptions());
  CHECK(server.ok() && client.ok());
  (*server)->Start(&handler);
  (*client)->Start(nullptr);
  PsClient ps(client->get(), &*layout, {(*server)->endpoint()}, PsClientOptions());
  std::vector<float> grads(n, 0.001f), params(n, 0.5f);
  CheckOk(ps.Push(params.data(), 0, /*init=*/true).Wait());
  const int reps = Reps(bytes);
  OursResult r;
  r.push = bench::MedianSeconds(2, reps, [&] { CheckOk(ps.Push(grads.data(), 0).Wait()); });
  r.pull = bench::MedianSeconds(2, reps, [&] { CheckOk(ps.Pull(params.data()).Wait()); });
  r.pushpull = bench::MedianSeconds(2, reps, [&] {
    CheckOk(ps.Push(grads.data(), 0).Wait());
    CheckOk(ps.Pull(params.data()).Wait());
  });
  // Verify: what we pulled last is what the server holds.
  const Partition& last = layout->partitions().back();
  std::optional<std::vector<float>> held = handler.Weights(last.key);
  CHECK(held.has_value());
  CHECK_EQ(std::memcmp(held->data(), params.data() + last.offset, last.bytes()), 0);
  CHECK_NE(params[0], 0.5f) << "updates were not applied";
  (*client)->Stop();
  (*server)->Stop();
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
  using namespace r2sp;
  const size_t kMB = 1000 * 1000;
  const std::vector<size_t> sizes = {1 * kMB, 16 * kMB, 100 * kMB};
  std::printf("%-8s %9s %11s %9s %9s %14s %9s %9s %11s\n", "payload", "raw_zmq",
              "transport", "our_push", "our_pull", "our_push+pull", "push/zmq", "pull/zmq",
              "trans/zmq");
  std::printf("%-8s %9s %11s %9s %9s %14s\n", "", "GB/s", "GB/s", "GB/s", "GB/s",
              "GB/s (2 dirs)");
  double push16 = 0, push100 = 0, pull100 = 0, pp16 = 0, pp100 = 0, trans16 = 0;
  for (size_t bytes : sizes) {
    const double raw = GBps(bytes, RawZmqSeconds(bytes));
    const double transport = GBps(bytes, TransportOnlySeconds(bytes));
    const OursResult ours = OursSeconds(bytes);
    const double push = GBps(bytes, ours.push);
    const double pull = GBps(bytes, ours.pull);
    const double pp = GBps(2.0 * bytes, ours.pushpull);
    std::printf("%-8s %9.2f %11.2f %9.2f %9.2f %14.2f %9.2f %9.2f %11.2f\n",
                absl::StrCat(bytes / kMB, "MB").c_str(), raw, transport, push, pull, pp,
                push / raw, pull / raw, transport / raw);
    std::fflush(stdout);
    if (bytes == 16 * kMB) push16 = push / raw, pp16 = pp, trans16 = transport / raw;
    if (bytes == 100 * kMB) push100 = push / raw, pull100 = pull / raw, pp100 = pp;
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
              "transport_vs_zmq_16MB=%.2f\n",
              push16, push100, pull100, pp16, pp100, apply_bw / memcpy_bw, trans16);
  return 0;
}
