// Throughput of the wire codecs against memcpy of the same fp32 buffer, measured interleaved
// (one of each per round) so a noisy moment hits every side of a ratio alike. Each figure is
// the codec's input bytes per second divided by memcpy's. So far: fp16 encode and decode, on
// the path EncodeFp16 picks and on each path this CPU has.
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "common/codec/fp16.h"
#include "gflags/gflags.h"
#include "tools/bench/bench_util.h"

DEFINE_int64(floats, 25000000, "values per buffer");
DEFINE_int32(rounds, 15, "timed rounds (after 2 warm-up rounds)");

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  using r2sp::codec::Fp16Path;
  const size_t n = static_cast<size_t>(FLAGS_floats);
  std::vector<float> grads(n), copy(n), decoded(n);
  std::vector<uint16_t> half(n);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1e-3f);  // gradient-like magnitudes
  for (float& g : grads) g = normal(rng);
  r2sp::codec::EncodeFp16(grads.data(), n, half.data());

  std::vector<std::function<void()>> bodies = {
      [&] { std::memcpy(copy.data(), grads.data(), n * sizeof(float)); },
      [&] { r2sp::codec::EncodeFp16(grads.data(), n, half.data()); },
      [&] { r2sp::codec::DecodeFp16(half.data(), n, decoded.data()); },
  };
  const std::vector<Fp16Path> paths = r2sp::codec::AvailableFp16Paths();
  for (Fp16Path p : paths) {
    bodies.push_back([&, p] { r2sp::codec::EncodeFp16With(p, grads.data(), n, half.data()); });
    bodies.push_back([&, p] { r2sp::codec::DecodeFp16With(p, half.data(), n, decoded.data()); });
  }
  const auto t = r2sp::bench::InterleavedSeconds(2, FLAGS_rounds, bodies);
  const double fp32_bytes = n * sizeof(float), fp16_bytes = n * sizeof(uint16_t);
  auto gbps = [&](int body, double bytes) { return bytes / r2sp::bench::Median(t[body]) / 1e9; };
  // Ratio of input-byte throughputs, per round: (in_bytes / t_codec) / (fp32_bytes / t_memcpy).
  auto vs_memcpy = [&](int body, double in_bytes) {
    return r2sp::bench::MedianRatio(t[0], t[body]) * in_bytes / fp32_bytes;
  };
  std::printf("%zu floats (%.0f MB fp32), medians of %d interleaved rounds\n", n, fp32_bytes / 1e6,
              FLAGS_rounds);
  std::printf("memcpy                 %6.2f GB/s\n", gbps(0, fp32_bytes));
  for (size_t k = 0; k < paths.size(); ++k) {
    const int enc = 3 + 2 * static_cast<int>(k), dec = enc + 1;
    std::printf("fp16 encode %-10s %6.2f GB/s in  (%.2fx memcpy)   decode %6.2f GB/s in  (%.2fx)\n",
                r2sp::codec::Fp16PathName(paths[k]), gbps(enc, fp32_bytes),
                vs_memcpy(enc, fp32_bytes), gbps(dec, fp16_bytes), vs_memcpy(dec, fp16_bytes));
  }
  std::printf("RESULT fp16_enc_vs_memcpy=%.2f fp16_dec_vs_memcpy=%.2f fp16_path=%s\n",
              vs_memcpy(1, fp32_bytes), vs_memcpy(2, fp16_bytes),
              r2sp::codec::Fp16PathName(paths.back()));
  return 0;
}
