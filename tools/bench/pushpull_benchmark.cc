// Push/pull throughput of R2SP's worker->server path against the raw ZeroMQ transport, and
// the server's optimizer apply rate against memcpy, all in one process run over loopback.
//   bazel run -c opt //tools/bench:pushpull_benchmark [-- --reps_scale=2]
// (a) raw: a cppzmq DEALER sends one zero-copy message of the whole payload to a ROUTER,
//     which answers with a 1-byte acknowledgement; the transport's ceiling.
// (b) ours: PsClient::Push / Pull of a one-tensor model of that size to a real ServerHandler
//     behind a Transport (1 MiB partitions by default, SGD with momentum applied on arrival),
//     in fp32 and, push+pull only, with each wire codec: fp16 (pushes and pulls in fp16), and
//     the sparse push codecs top-k and csc (error feedback on, as a worker runs them; pulls
//     stay fp32); and each codec's push alone. A codec's figure counts the fp32 gradient and
//     weight bytes moved (what the job gets), and its ratio is time fp32 / time codec for the
//     same gradient: for pushes alone, the effective gradient bytes per second over fp32's.
// (c) transport only: the same partitions through our Transport and framing to a handler that
//     only acknowledges, i.e. (b) without the optimizer: what the protocol itself costs.
// (d) with --auth=curve: (b)'s fp32 push+pull between a worker and a server that speak CURVE
//     (keys made in memory, a ZAP handler on the server, as with the binaries' --auth=curve,
//     with --curve_io_threads and --curve_connections), and its ratio to plain (b) per round.
// (e) with --link=RATE (e.g. 419mbit): all of the above on a loopback shaped to that rate in a
//     private network namespace (tools/bench/shaped_loopback.h; root), where bytes cost what a
//     link charges for them instead of a memory copy. One queue carries both directions.
// All of a size's measurements run interleaved, round by round, on connections set up once;
// GB/s are medians over rounds (payload bytes per second, 1 GB = 1e9 bytes; push+pull counts
// both directions) and the ratios are medians of the per-round ratios, so a noisy moment of the
// machine hits both sides of a ratio alike. The gradient is bench::GradientLike (normal, sigma
// 1e-3), the same for every push and codec.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/cli.h"
#include "common/codec/codec_spec.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "server/sgd.h"
#include "tools/bench/bench_util.h"
#include "tools/bench/pushpull_setups.h"
#include "tools/bench/shaped_loopback.h"
#include "tools/bench/thread_cpu.h"

DEFINE_double(reps_scale, 1.0, "multiply every repetition count by this");
DEFINE_uint64(partition_bytes, 1 << 20, "largest partition (the scheduler's default)");
DEFINE_int64(apply_floats, 100000000, "floats in the optimizer apply measurement");
DEFINE_string(sizes_mb, "1,16,100",
              "payload sizes in MB (1e6 bytes); the RESULT line reports "
              "16 and 100 (nan when not measured)");
DEFINE_string(topk_codec, "topk:0.01", "the top-k push codec compared (a worker --push_codec)");
DEFINE_string(csc_codec, "csc:0.05", "the csc push codec compared (a worker --push_codec)");
DEFINE_string(auth, "none", "curve: also time fp32 push+pull over CurveZMQ (keys made in "
              "memory), against plain in the same rounds");
DEFINE_int32(curve_io_threads, 2, "--auth=curve: ZeroMQ I/O threads at each end (the binaries' "
             "--io_threads; 2 is their default with --auth=curve)");
DEFINE_int32(curve_connections, 0, "--auth=curve: the worker's connections to the server (the "
             "binaries' --connections_per_peer; 0: --curve_io_threads, their default)");
DEFINE_string(link, "", "run over a loopback shaped to this rate (e.g. 419mbit, 1gbit) in a "
              "private network namespace; needs root, ip and tc");

namespace r2sp {
namespace {

int Reps(size_t bytes) {
  const int base = bytes <= (1 << 20) ? 200 : bytes <= (16 << 20) ? 30 : 8;
  return std::max(3, static_cast<int>(base * FLAGS_reps_scale));
}

// A codec compared with fp32 push+pull: its RESULT name and what it is.
struct CodecColumn {
  std::string key;  // fp16, topk, csc
  codec::CodecSpec spec;
};

std::vector<CodecColumn> CodecColumns() {
  std::vector<CodecColumn> columns = {{"fp16", codec::CodecSpec()}, {"topk", {}}, {"csc", {}}};
  columns[0].spec.codec = proto::FP16;
  columns[1].spec = ValueOrExit(codec::ParseCodecSpec("topk_codec", FLAGS_topk_codec));
  columns[2].spec = ValueOrExit(codec::ParseCodecSpec("csc_codec", FLAGS_csc_codec));
  CHECK_EQ(columns[1].spec.codec, proto::TOPK) << "--topk_codec must be a topk codec";
  CHECK_EQ(columns[2].spec.codec, proto::CSC) << "--csc_codec must be a csc codec";
  return columns;
}

// libzmq names its I/O threads "ZMQbg/IO/N".
constexpr char kZmqIoThread[] = "ZMQbg/IO";

// One payload size: all measurements interleaved round by round (bench::InterleavedSeconds),
// so that ratios compare runs taken at the same moments of a noisy machine.
struct SizeResult {
  double raw, transport, push, pull, pushpull;        // median seconds
  double push_vs_raw, pull_vs_raw, transport_vs_raw;  // median per-round throughput ratios
  // Per CodecColumn: push+pull median seconds; time fp32 / time codec for the same gradient,
  // per round; the pushes' wire bytes over fp32's; push alone: median seconds and time fp32
  // push / time codec push per round (effective gradient bytes per second over fp32's).
  std::vector<double> codec_pushpull, codec_vs_fp32, codec_wire, codec_push, codec_push_vs_fp32;
  // --auth=curve: push+pull median seconds over CURVE; time plain / time CURVE, per round;
  // median CPU seconds the process used per plain and per CURVE push+pull.
  double curve_pushpull = 0, curve_vs_plain = 0, plain_cpu = 0, curve_cpu = 0;
  // --auth=curve: each of the CURVE pair's ZeroMQ I/O threads' CPU seconds per push+pull,
  // largest first (where the cipher runs).
  std::vector<double> curve_io_cpu;
};

SizeResult MeasureSize(size_t bytes, const std::vector<CodecColumn>& codecs) {
  const std::vector<float> grads = bench::GradientLike(bytes / sizeof(float));
  bench::RawZmq raw(bytes);
  bench::TransportOnly transport(bytes, FLAGS_partition_bytes);
  bench::Ours ours(grads, codec::CodecSpec(), FLAGS_partition_bytes);
  std::vector<std::unique_ptr<bench::Ours>> coded;
  std::vector<std::function<void()>> bodies = {[&] { raw.Once(); }, [&] { transport.Once(); },
                                               [&] { ours.Push(); }, [&] { ours.Pull(); },
                                               [&] { ours.PushPull(); }};
  constexpr int kFirstCodec = 5;
  for (const CodecColumn& c : codecs) {
    coded.push_back(std::make_unique<bench::Ours>(grads, c.spec, FLAGS_partition_bytes));
    bodies.push_back([o = coded.back().get()] { o->PushPull(); });
  }
  const size_t first_codec_push = bodies.size();
  for (const auto& o : coded) bodies.push_back([o = o.get()] { o->Push(); });
  std::unique_ptr<bench::Ours> curve;
  std::vector<double> plain_cpu, curve_cpu;  // where CURVE's time goes: CPU per round
  std::unique_ptr<bench::ThreadCpuMeter> curve_io;  // and on which threads
  if (FLAGS_auth == "curve") {
    const auto keys = ValueOrExit(GenerateJobKeys());
    const std::vector<int> before = bench::ThreadsNamed(kZmqIoThread);
    curve = std::make_unique<bench::Ours>(
        grads, codec::CodecSpec(), FLAGS_partition_bytes, &keys, FLAGS_curve_io_threads,
        FLAGS_curve_connections > 0 ? FLAGS_curve_connections : FLAGS_curve_io_threads);
    std::vector<int> io_threads;  // the CURVE pair's: new since `before`
    for (int tid : bench::ThreadsNamed(kZmqIoThread)) {
      if (std::find(before.begin(), before.end(), tid) == before.end()) io_threads.push_back(tid);
    }
    curve_io = std::make_unique<bench::ThreadCpuMeter>(std::move(io_threads));
    bodies[4] = bench::CountingCpu(bodies[4], &plain_cpu);
    bodies.push_back(bench::CountingCpu(curve_io->Counting([&curve] { curve->PushPull(); }),
                                        &curve_cpu));
  }
  const std::vector<std::vector<double>> t = bench::InterleavedSeconds(2, Reps(bytes), bodies);
  SizeResult r;
  r.raw = bench::Median(t[0]);
  r.transport = bench::Median(t[1]);
  r.push = bench::Median(t[2]);
  r.pull = bench::Median(t[3]);
  r.pushpull = bench::Median(t[4]);
  for (size_t c = 0; c < codecs.size(); ++c) {
    r.codec_pushpull.push_back(bench::Median(t[kFirstCodec + c]));
    r.codec_vs_fp32.push_back(bench::MedianRatio(t[4], t[kFirstCodec + c]));
    r.codec_wire.push_back(coded[c]->WireFraction());
    r.codec_push.push_back(bench::Median(t[first_codec_push + c]));
    r.codec_push_vs_fp32.push_back(bench::MedianRatio(t[2], t[first_codec_push + c]));
  }
  if (curve != nullptr) {
    r.curve_pushpull = bench::Median(t.back());
    r.curve_vs_plain = bench::MedianRatio(t[4], t.back());
    r.plain_cpu = bench::Median(plain_cpu);
    r.curve_cpu = bench::Median(curve_cpu);
    r.curve_io_cpu = curve_io->PerCall();
  }
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
  r.apply_seconds = bench::MedianSeconds(
      1, 5, [&] { SgdApply(sgd, 1.0f, g.data(), w.data(), w.data(), m.data(), n); });
  r.memcpy_seconds =
      bench::MedianSeconds(1, 5, [&] { std::memcpy(dst.data(), w.data(), n * sizeof(float)); });
  CHECK_EQ(dst[n - 1], w[n - 1]);
  return r;
}

double GBps(double bytes, double seconds) { return bytes / seconds / 1e9; }

constexpr size_t kMB = 1000 * 1000;

std::vector<size_t> SizesFromFlag() {
  std::vector<size_t> sizes;
  for (absl::string_view mb : absl::StrSplit(FLAGS_sizes_mb, ',')) {
    size_t n = 0;
    CHECK(absl::SimpleAtoi(mb, &n) && n > 0) << "--sizes_mb: bad size '" << mb << "'";
    sizes.push_back(n * kMB);
  }
  return sizes;
}

void PrintHeader(const std::vector<CodecColumn>& codecs) {
  std::printf("%-8s %9s %11s %9s %9s %14s", "payload", "raw_zmq", "transport", "our_push",
              "our_pull", "our_push+pull");
  for (const CodecColumn& c : codecs) {
    std::printf(" %19s", (codec::CodecSpecName(c.spec) + " push+pull").c_str());
  }
  std::printf(" %9s %9s %11s", "push/zmq", "pull/zmq", "trans/zmq");
  for (const CodecColumn& c : codecs) std::printf(" %10s", (c.key + "/fp32").c_str());
  for (const CodecColumn& c : codecs) {
    std::printf(" %19s", (codec::CodecSpecName(c.spec) + " push").c_str());
  }
  for (const CodecColumn& c : codecs) std::printf(" %11s", (c.key + " push/fp32").c_str());
  std::printf("\n%-8s %9s %11s %9s %9s %14s", "", "GB/s", "GB/s", "GB/s", "GB/s", "GB/s (2 dirs)");
  for (size_t c = 0; c < codecs.size(); ++c) std::printf(" %19s", "fp32-equiv GB/s");
  std::printf(" %9s %9s %11s", "", "", "");
  for (size_t c = 0; c < codecs.size(); ++c) std::printf(" %10s", "");
  for (size_t c = 0; c < codecs.size(); ++c) std::printf(" %19s", "fp32-equiv GB/s");
  std::printf("\n");
}

// The codecs' columns count the fp32 gradient and weight bytes moved: what the job gets.
void PrintRow(size_t bytes, const SizeResult& r, const std::vector<CodecColumn>& codecs) {
  std::printf("%-8s %9.2f %11.2f %9.2f %9.2f %14.2f", absl::StrCat(bytes / kMB, "MB").c_str(),
              GBps(bytes, r.raw), GBps(bytes, r.transport), GBps(bytes, r.push),
              GBps(bytes, r.pull), GBps(2.0 * bytes, r.pushpull));
  for (double seconds : r.codec_pushpull) std::printf(" %19.2f", GBps(2.0 * bytes, seconds));
  std::printf(" %9.2f %9.2f %11.2f", r.push_vs_raw, r.pull_vs_raw, r.transport_vs_raw);
  for (double ratio : r.codec_vs_fp32) std::printf(" %10.2f", ratio);
  for (double seconds : r.codec_push) std::printf(" %19.2f", GBps(bytes, seconds));
  for (double ratio : r.codec_push_vs_fp32) std::printf(" %11.2f", ratio);
  std::printf("\n%-8s pushes' wire bytes vs fp32:", "");
  for (size_t c = 0; c < codecs.size(); ++c) {
    std::printf(" %s %.2f%%", codec::CodecSpecName(codecs[c].spec).c_str(), 100 * r.codec_wire[c]);
  }
  if (r.curve_pushpull > 0) {
    std::printf("\n%-8s CURVE fp32 push+pull: %.2f GB/s (2 dirs), %.2fx plain in the same rounds",
                "", GBps(2.0 * bytes, r.curve_pushpull), r.curve_vs_plain);
    // Both ends share this machine's cores: CPU per round over the cores there are bounds
    // a round's time from below.
    std::printf("\n%-8s CPU per push+pull, both ends: plain %.1f ms (%.2f cores busy), CURVE %.1f "
                "ms (%.2f cores busy)", "", r.plain_cpu * 1e3, r.plain_cpu / r.pushpull,
                r.curve_cpu * 1e3, r.curve_cpu / r.curve_pushpull);
    // With a core for each I/O thread, a round takes at least what the busiest one does.
    std::printf("\n%-8s CURVE's ZeroMQ I/O threads, CPU per push+pull (ms):", "");
    for (double s : r.curve_io_cpu) std::printf(" %.1f", s * 1e3);
    std::printf(" (plain push+pull: %.1f ms)", r.pushpull * 1e3);
  }
  std::printf("\n");
  std::fflush(stdout);
}

// Prints the apply line; returns apply's memory bandwidth over memcpy's.
double PrintApply(const ApplyResult& apply) {
  const double n_bytes = static_cast<double>(FLAGS_apply_floats) * sizeof(float);
  // SGD with momentum streams 5 arrays (read g, w, m; write w, m); memcpy streams 2.
  const double apply_bw = GBps(5 * n_bytes, apply.apply_seconds);
  const double memcpy_bw = GBps(2 * n_bytes, apply.memcpy_seconds);
  std::printf(
      "apply: SGD+momentum over %lld floats: %.1f ms (%.2f GB/s of gradient, %.2f GB/s "
      "memory traffic); memcpy of the same bytes: %.1f ms (%.2f GB/s traffic)\n",
      static_cast<long long>(FLAGS_apply_floats), apply.apply_seconds * 1e3,
      GBps(n_bytes, apply.apply_seconds), apply_bw, apply.memcpy_seconds * 1e3, memcpy_bw);
  return apply_bw / memcpy_bw;
}

// The RESULT line's figures from the 16 MB and 100 MB sizes (nan when a size did not run).
struct Headline {
  static constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
  double push16 = kNone, push100 = kNone, pull100 = kNone, pp16 = kNone, pp100 = kNone,
         trans16 = kNone;
  // Per CodecColumn: time fp32 / time codec, push+pull and push alone.
  std::vector<double> codec16, codec100, push_codec16, push_codec100;
  double curve1 = kNone, curve16 = kNone, curve100 = kNone;  // --auth=curve: CURVE / plain
  // --auth=curve, 16 MB: plain push+pull time over the busiest CURVE I/O thread's CPU per
  // round, the most CURVE / plain can be with a core for each I/O thread.
  double curve_io_bound16 = kNone;

  Headline(size_t codecs)
      : codec16(codecs, kNone),
        codec100(codecs, kNone),
        push_codec16(codecs, kNone),
        push_codec100(codecs, kNone) {}
  void Record(size_t bytes, const SizeResult& r) {
    const double pp = GBps(2.0 * bytes, r.pushpull);
    if (r.curve_pushpull > 0) {
      (bytes == kMB ? curve1 : bytes == 16 * kMB ? curve16 : curve100) =
          bytes == kMB || bytes == 16 * kMB || bytes == 100 * kMB ? r.curve_vs_plain : kNone;
    }
    if (bytes == 16 * kMB && !r.curve_io_cpu.empty() && r.curve_io_cpu[0] > 0) {
      curve_io_bound16 = r.pushpull / r.curve_io_cpu[0];
    }
    if (bytes == 16 * kMB) {
      push16 = r.push_vs_raw, pp16 = pp, trans16 = r.transport_vs_raw, codec16 = r.codec_vs_fp32;
      push_codec16 = r.codec_push_vs_fp32;
    }
    if (bytes == 100 * kMB) {
      push100 = r.push_vs_raw, pull100 = r.pull_vs_raw, pp100 = pp, codec100 = r.codec_vs_fp32;
      push_codec100 = r.codec_push_vs_fp32;
    }
  }
  void Print(double apply_vs_memcpy, const std::vector<CodecColumn>& codecs) const {
    std::printf(
        "RESULT push_vs_zmq_16MB=%.2f push_vs_zmq_100MB=%.2f pull_vs_zmq_100MB=%.2f "
        "pushpull_GBps_16MB=%.2f pushpull_GBps_100MB=%.2f apply_vs_memcpy=%.2f "
        "transport_vs_zmq_16MB=%.2f",
        push16, push100, pull100, pp16, pp100, apply_vs_memcpy, trans16);
    for (size_t c = 0; c < codecs.size(); ++c) {
      const char* key = codecs[c].key.c_str();
      std::printf(" %s_vs_fp32_pushpull_16MB=%.2f %s_vs_fp32_pushpull_100MB=%.2f", key, codec16[c],
                  key, codec100[c]);
    }
    for (size_t c = 0; c < codecs.size(); ++c) {
      const char* key = codecs[c].key.c_str();
      std::printf(" %s_vs_fp32_push_16MB=%.2f %s_vs_fp32_push_100MB=%.2f", key, push_codec16[c],
                  key, push_codec100[c]);
    }
    if (FLAGS_auth == "curve") {
      std::printf(" curve_vs_plain_pushpull_1MB=%.2f curve_vs_plain_pushpull_16MB=%.2f "
                  "curve_vs_plain_pushpull_100MB=%.2f curve_io_thread_bound_16MB=%.2f", curve1,
                  curve16, curve100, curve_io_bound16);
    }
    std::printf("\n");
  }
};

}  // namespace
}  // namespace r2sp

int main(int argc, char** argv) {
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = 1;
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  r2sp::KeepFreedMemoryForReuse();  // as the server and worker binaries do
  using namespace r2sp;
  if (!FLAGS_link.empty()) {  // before any socket or thread exists
    const uint64_t bits = ValueOrExit(bench::ParseLinkRate(FLAGS_link));
    const absl::Status shaped = bench::EnterShapedLoopback(bits);
    if (!shaped.ok()) ExitWithError(shaped);
    std::printf("link: loopback shaped to %.1f Mbit/s (tbf, burst %llu bytes) in a private "
                "network namespace; both directions share it\n",
                bits / 1e6, static_cast<unsigned long long>(bench::LinkBurstBytes(bits)));
  }
  const std::vector<CodecColumn> codecs = CodecColumns();
  const std::vector<size_t> sizes = SizesFromFlag();
  PrintHeader(codecs);
  Headline headline(codecs.size());
  for (size_t bytes : sizes) {
    const SizeResult r = MeasureSize(bytes, codecs);
    PrintRow(bytes, r, codecs);
    headline.Record(bytes, r);
  }
  headline.Print(PrintApply(ApplyVsMemcpy()), codecs);
  return 0;
}
