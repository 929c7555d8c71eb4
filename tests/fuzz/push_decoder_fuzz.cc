// Fuzz target: the server's PUSH payload decoder (common/wire/push_frames.h) for every codec
// (fp32, fp16, top-k and csc with fp32 or fp16 values), and what consumes what it accepts: the
// optimizer's update (PartitionState::Apply) and BSP's per-clock sum (ClockAggregator::Add),
// whose sum must equal the gradient the view describes. Input: a partition-size byte, then
// messages (fuzz_input.h) decoded by one PushDecoder in turn, as the server's is.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/message.h"
#include "common/wire/push_frames.h"
#include "glog/logging.h"
#include "server/clock_aggregator.h"
#include "server/partition_state.h"
#include "tests/fuzz/fuzz_input.h"

namespace r2sp::fuzz {
namespace {

// The dense gradient a view describes, checking what the decoder promises of it.
std::vector<float> Densify(const wire::GradientView& g, size_t n) {
  CHECK_EQ(g.num_elements, n);
  std::vector<float> dense(n, 0.0f);
  switch (g.kind) {
    case wire::GradientView::Kind::kDense:
      std::memcpy(dense.data(), g.dense, n * sizeof(float));
      break;
    case wire::GradientView::Kind::kSparse:
      for (size_t j = 0; j < g.count; ++j) {
        CHECK_LT(g.ids[j], n);
        CHECK(j == 0 || g.ids[j] > g.ids[j - 1]);
        dense[g.ids[j]] = g.values[j];
      }
      break;
    case wire::GradientView::Kind::kChunks:
      CHECK_GT(g.chunk_elements, 0u);
      g.ForEachChunk([&dense, n](size_t begin, size_t length, const float* v) {
        CHECK_LE(begin + length, n);
        std::memcpy(dense.data() + begin, v, length * sizeof(float));
      });
      break;
  }
  for (float v : dense) CHECK(std::isfinite(v));
  return dense;
}

}  // namespace
}  // namespace r2sp::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace r2sp;
  fuzz::FuzzInput in(data, size);
  const size_t n = 1 + in.Byte() % 70;
  wire::PushDecoder decoder;
  PartitionState state(n);
  std::vector<float> zeros(n, 0.0f);
  state.Init(zeros.data());
  int64_t clock = 0;
  while (!in.empty()) {
    std::vector<zmq::message_t> frames = fuzz::TakeFrames(in);
    absl::StatusOr<Message> push = DecodeFrames(frames, DecodeLimits());
    if (!push.ok()) continue;
    absl::StatusOr<wire::GradientView> grad = decoder.Decode(*push, n);
    if (!grad.ok()) continue;
    const std::vector<float> dense = fuzz::Densify(*grad, n);
    ClockAggregator aggregator(n, 1);
    CHECK(aggregator.Add(0, 0, *grad).ok());
    for (size_t i = 0; i < n; ++i) CHECK_EQ(aggregator.sum()[i], dense[i]) << "element " << i;
    state.Apply(SgdOptions{0.1f, 0.9f, 0.01f}, 0.5f, *grad);
    CHECK_EQ(state.version(), ++clock);
  }
  return 0;
}
