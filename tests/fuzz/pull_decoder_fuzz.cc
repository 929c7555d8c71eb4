// Fuzz target: the worker's PULL reply decoder (common/wire/pull_frames.h) for every codec it may
// have asked for (fp32, fp16, fp16 deltas). A reply it refuses must leave the weights as they
// were. Input: what was asked (codec, size, delta base), then replies (fuzz_input.h).
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/message.h"
#include "common/wire/pull_frames.h"
#include "glog/logging.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace r2sp;
  fuzz::FuzzInput in(data, size);
  static constexpr proto::Codec kAsked[] = {proto::FP32, proto::FP16, proto::FP16_DELTA};
  wire::PullAsked asked;
  asked.key = in.Byte();
  asked.codec = kAsked[in.Byte() % 3];
  asked.num_elements = in.Byte() % 70;
  asked.delta_base = in.Byte() % 4;
  std::vector<float> weights(asked.num_elements, 1.0f);
  while (!in.empty()) {
    std::vector<zmq::message_t> frames = fuzz::TakeFrames(in);
    absl::StatusOr<Message> reply = DecodeFrames(frames, DecodeLimits());
    if (!reply.ok()) continue;
    const std::vector<float> before = weights;
    absl::StatusOr<wire::PulledPartition> pulled =
        wire::DecodePullReply(*reply, asked, weights.data());
    if (!pulled.ok()) {
      CHECK(before.empty() ||
            std::memcmp(before.data(), weights.data(), before.size() * sizeof(float)) == 0)
          << "a refused reply changed the weights: " << pulled.status();
      continue;
    }
    CHECK_EQ(pulled->bytes, PayloadBytes(*reply));
    if (asked.codec == proto::FP16_DELTA) asked.delta_base = pulled->delta_seq;
  }
  return 0;
}
