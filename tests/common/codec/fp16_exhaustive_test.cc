// Every one of the 2^32 fp32 bit patterns through every fp16 path against the scalar reference,
// on all cores: the hardware paths (F16C, AVX-512) are an independent implementation, so this
// checks the reference on every input too. About 9 s on 2 cores (compiled -O3 in any build).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "common/codec/fp16.h"
#include "gtest/gtest.h"

namespace r2sp::codec {
namespace {

TEST(Fp16ExhaustiveTest, EveryFloatMatchesTheReference) {
  constexpr uint64_t kTotal = uint64_t{1} << 32;
  constexpr uint64_t kChunk = uint64_t{1} << 20;
  const std::vector<Fp16Path> paths = AvailableFp16Paths();
  std::atomic<uint64_t> next{0}, mismatches{0};
  auto work = [&] {
    std::vector<float> in(kChunk);
    std::vector<uint16_t> want(kChunk), got(kChunk);
    for (uint64_t start; (start = next.fetch_add(kChunk)) < kTotal;) {
      for (uint64_t i = 0; i < kChunk; ++i) {
        const uint32_t bits = static_cast<uint32_t>(start + i);
        std::memcpy(&in[i], &bits, sizeof(bits));
        want[i] = FloatToHalf(in[i]);
      }
      for (Fp16Path path : paths) {
        EncodeFp16With(path, in.data(), kChunk, got.data());
        if (!std::equal(got.begin(), got.end(), want.begin())) mismatches.fetch_add(1);
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < std::max(1u, std::thread::hardware_concurrency()); ++t) {
    threads.emplace_back(work);
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0u) << "chunks where a path differs from the reference";
}

}  // namespace
}  // namespace r2sp::codec
