// Reads a fuzz target's input as a few fields and length-prefixed chunks, and splits it into
// ZeroMQ frames as the transport would hand them over; the seed generator writes the same
// layout (AppendChunk). Every read is defined on any input: past the end, a read gives zeros or
// an empty chunk.
#ifndef R2SP_TESTS_FUZZ_FUZZ_INPUT_H_
#define R2SP_TESTS_FUZZ_FUZZ_INPUT_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/message.h"

namespace r2sp::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool empty() const { return pos_ >= size_; }
  uint8_t Byte() { return empty() ? 0 : data_[pos_++]; }
  uint16_t U16() {
    const uint16_t low = Byte();
    return static_cast<uint16_t>(low | (Byte() << 8));
  }
  // A chunk: a little-endian u16 length, then that many bytes (fewer at the end of the input).
  std::string_view Chunk() {
    const size_t want = U16();
    const size_t n = std::min(want, size_ - std::min(pos_, size_));
    std::string_view chunk(reinterpret_cast<const char*>(data_) + pos_, n);
    pos_ += n;
    return chunk;
  }
  std::string_view Rest() {
    std::string_view rest(reinterpret_cast<const char*>(data_) + std::min(pos_, size_),
                          size_ - std::min(pos_, size_));
    pos_ = size_;
    return rest;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// The most frames one message takes: one more than DecodeLimits allows (a header and 16
// payload frames), so that limit is exercised too.
inline constexpr int kMaxFrames = 18;

// One received message: a frame-count byte (1 + byte % kMaxFrames), then a chunk per frame.
// The frames borrow the input, at whatever alignment the chunks have, as frames received
// without a copy may (libzmq's zero-copy receive points into its read buffer).
inline std::vector<zmq::message_t> TakeFrames(FuzzInput& in) {
  const int count = 1 + in.Byte() % kMaxFrames;
  std::vector<zmq::message_t> frames;
  for (int i = 0; i < count; ++i) {
    const std::string_view chunk = in.Chunk();
    frames.push_back(BorrowedFrame(chunk.data(), chunk.size()));
  }
  return frames;
}

// What the seed generator writes: a chunk, and a message's frames (header then payload).
inline void AppendChunk(std::string* out, std::string_view bytes) {
  const size_t n = std::min<size_t>(bytes.size(), 0xffff);
  out->push_back(static_cast<char>(n & 0xff));
  out->push_back(static_cast<char>(n >> 8));
  out->append(bytes.data(), n);
}
inline void AppendFrames(std::string* out, const std::vector<std::string>& frames) {
  out->push_back(static_cast<char>(frames.size() - 1));  // 1 + byte % kMaxFrames == size
  for (const std::string& f : frames) AppendChunk(out, f);
}

}  // namespace r2sp::fuzz

#endif  // R2SP_TESTS_FUZZ_FUZZ_INPUT_H_
