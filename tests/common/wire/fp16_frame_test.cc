// Fp16Frame (common/wire/fp16_frame.h): a frame of its own holding exactly what the fp16 codec
// makes of the values (round to nearest even), and an empty frame for no values.
#include "common/wire/fp16_frame.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "common/codec/fp16.h"
#include "gtest/gtest.h"

namespace r2sp::wire {
namespace {

TEST(Fp16FrameTest, HoldsTheCodecsBinary16Values) {
  const std::vector<float> v = {1.0f, -2.0f, 0.1f, 65504.0f, 1e-8f};
  zmq::message_t frame = Fp16Frame(v.data(), v.size());
  ASSERT_EQ(frame.size(), v.size() * sizeof(uint16_t));
  std::vector<uint16_t> got(v.size());
  std::memcpy(got.data(), frame.data(), frame.size());
  // 1, -2, 0.1 (rounded), the largest binary16, and a value that rounds to zero.
  EXPECT_EQ(got, (std::vector<uint16_t>{0x3c00, 0xc000, 0x2e66, 0x7bff, 0x0000}));
  std::vector<uint16_t> reference(v.size());
  codec::EncodeFp16(v.data(), v.size(), reference.data());
  EXPECT_EQ(got, reference);
}

TEST(Fp16FrameTest, NoValuesMakeAnEmptyFrame) { EXPECT_EQ(Fp16Frame(nullptr, 0).size(), 0u); }

}  // namespace
}  // namespace r2sp::wire
