// Fuzz target: the codec decoders and parsers of common/codec: fp16 decoding on every path
// this CPU has (each must match the scalar reference bit for bit, from any alignment), fp16
// deltas added to a copy, and --push_codec/--pull_codec specs (a spec that parses must print
// back to text that parses to the same spec). Input: a selector byte, then the bytes to decode
// or parse.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/codec/codec_spec.h"
#include "common/codec/fp16.h"
#include "common/codec/fp16_delta.h"
#include "glog/logging.h"
#include "tests/fuzz/fuzz_input.h"

namespace r2sp::fuzz {
namespace {

// Decodes the bytes from `offset` bytes past an aligned address (received frames may be
// unaligned) on every path.
void DecodeOnEveryPath(std::string_view bytes, size_t offset) {
  const size_t n = bytes.size() / sizeof(uint16_t);
  if (n == 0) return;
  std::vector<uint16_t> buffer(n + 1);
  char* start = reinterpret_cast<char*>(buffer.data()) + offset;
  std::memcpy(start, bytes.data(), n * sizeof(uint16_t));
  const uint16_t* in = reinterpret_cast<const uint16_t*>(start);
  std::vector<float> want(n), got(n);
  codec::DecodeFp16With(codec::Fp16Path::kScalar, in, n, want.data());
  for (codec::Fp16Path path : codec::AvailableFp16Paths()) {
    codec::DecodeFp16With(path, in, n, got.data());
    CHECK(std::memcmp(want.data(), got.data(), n * sizeof(float)) == 0)
        << codec::Fp16PathName(path) << " differs from the scalar decoder";
  }
  std::vector<float> copy(n, 0.5f);
  codec::AddFp16Deltas(in, n, copy.data());
  for (size_t i = 0; i < n; ++i) {
    const float expected = 0.5f + want[i];
    CHECK(std::memcmp(&copy[i], &expected, sizeof(float)) == 0 || (copy[i] != copy[i]))
        << "delta " << i;
  }
}

void ParseSpec(std::string_view text) {
  absl::StatusOr<codec::CodecSpec> spec = codec::ParseCodecSpec("--push_codec", std::string(text));
  if (!spec.ok()) return;
  const std::string name = codec::CodecSpecName(*spec);
  absl::StatusOr<codec::CodecSpec> again = codec::ParseCodecSpec("--push_codec", name);
  CHECK(again.ok()) << "'" << name << "' (from '" << text << "'): " << again.status();
  CHECK_EQ(codec::CodecSpecName(*again), name);
  CHECK(again->codec == spec->codec && again->ratio == spec->ratio &&
        again->fp16_values == spec->fp16_values && again->exact == spec->exact &&
        again->chunk_elements == spec->chunk_elements)
      << "'" << name << "' reads back differently";
}

}  // namespace
}  // namespace r2sp::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  r2sp::fuzz::FuzzInput in(data, size);
  const uint8_t selector = in.Byte();
  if (selector % 2 == 0) {
    r2sp::fuzz::DecodeOnEveryPath(in.Rest(), (selector >> 1) & 1);
  } else {
    r2sp::fuzz::ParseSpec(in.Rest());
  }
  return 0;
}
