// Where --auth=curve's time goes: the per-core throughput of the cipher libzmq's CURVE uses for
// every message (libsodium's XSalsa20-Poly1305 crypto_box, sealing and opening), next to the
// AEADs libsodium offers instead (AES-256-GCM where the CPU has AES-NI, ChaCha20-Poly1305) and
// memcpy, on one buffer of --mb MB. Medians of --reps runs each, interleaved.
//   bazel run -c opt //tools/bench:crypto_throughput [-- --mb=16 --reps=9]
#include <sodium.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "absl/time/clock.h"
#include "gflags/gflags.h"

DEFINE_int32(mb, 16, "buffer size, MB");
DEFINE_int32(reps, 9, "timed runs of each primitive");

namespace {

double MedianGBps(std::vector<double> seconds, size_t bytes) {
  std::sort(seconds.begin(), seconds.end());
  return bytes / seconds[seconds.size() / 2] / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (sodium_init() < 0 || FLAGS_mb < 1 || FLAGS_reps < 1) return 2;
  const size_t n = static_cast<size_t>(FLAGS_mb) << 20;
  std::vector<unsigned char> plain(n, 7), sealed(n + 64, 0), opened(n + 64, 0);
  unsigned char pk[crypto_box_PUBLICKEYBYTES], sk[crypto_box_SECRETKEYBYTES];
  unsigned char shared[crypto_box_BEFORENMBYTES], nonce[crypto_box_NONCEBYTES] = {};
  unsigned char key[32] = {1}, npub[12] = {};
  crypto_box_keypair(pk, sk);
  if (crypto_box_beforenm(shared, pk, sk) != 0) return 1;
  const bool aes = crypto_aead_aes256gcm_is_available();
  unsigned long long len = 0;
  struct Primitive {
    const char* name;
    std::function<void()> run;
    std::vector<double> seconds;
  };
  std::vector<Primitive> all = {
      {"curve seal (crypto_box_easy_afternm)",
       [&] { crypto_box_easy_afternm(sealed.data(), plain.data(), n, nonce, shared); }, {}},
      {"curve open (crypto_box_open_easy_afternm)",
       [&] {
         if (crypto_box_open_easy_afternm(opened.data(), sealed.data(), n + crypto_box_MACBYTES,
                                          nonce, shared) != 0) {
           std::abort();
         }
       }, {}},
      {"chacha20-poly1305 seal",
       [&] {
         crypto_aead_chacha20poly1305_ietf_encrypt(sealed.data(), &len, plain.data(), n, nullptr,
                                                   0, nullptr, npub, key);
       }, {}},
      {"memcpy", [&] { std::memcpy(opened.data(), plain.data(), n); }, {}},
  };
  if (aes) {
    all.push_back({"aes-256-gcm seal", [&] {
                     crypto_aead_aes256gcm_encrypt(sealed.data(), &len, plain.data(), n, nullptr,
                                                   0, nullptr, npub, key);
                   }, {}});
  }
  for (Primitive& p : all) p.run();  // warm up: every page touched
  for (int r = 0; r < FLAGS_reps; ++r) {
    for (Primitive& p : all) {
      const absl::Time start = absl::Now();
      p.run();
      p.seconds.push_back(absl::ToDoubleSeconds(absl::Now() - start));
    }
  }
  std::printf("%d MB buffer, median of %d runs, one core\n", FLAGS_mb, FLAGS_reps);
  for (const Primitive& p : all) {
    std::printf("%-44s %7.2f GB/s\n", p.name, MedianGBps(p.seconds, n));
  }
  if (!aes) std::printf("aes-256-gcm: not available on this CPU\n");
  return 0;
}
