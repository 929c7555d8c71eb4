// SparseEncoder: error feedback conserves every gradient bit-exactly (sent + residual == sum of
// the gradients, on dyadic values whose sums are exact) for top-k and csc with fp32 and fp16
// values; what each push carries; dropping without error feedback; DGC momentum correction
// with momentum factor masking; and the density each push is given (csc: as chunk credit).
#include "common/codec/sparse_encoder.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/codec/csc.h"
#include "common/codec/fp16.h"
#include "gtest/gtest.h"

namespace r2sp::codec {
namespace {

struct Config {
  proto::Codec codec;
  bool fp16_values;
  bool exact;  // top-k only
  std::string Name() const {
    return std::string(codec == proto::TOPK ? "topk" : "csc") + (fp16_values ? " fp16" : " fp32") +
           (exact ? " exact" : "");
  }
};

const Config kConfigs[] = {
    {proto::TOPK, false, false}, {proto::TOPK, true, false}, {proto::TOPK, false, true},
    {proto::TOPK, true, true},   {proto::CSC, false, false}, {proto::CSC, true, false},
};

constexpr size_t kN = 10000;     // above TopKOptions::min_samples, so top-k samples
constexpr uint32_t kChunk = 64;  // 157 chunks, the last one of 16 values

SparseEncoderOptions OptionsFor(const Config& c) {
  SparseEncoderOptions options;
  options.spec.codec = c.codec;
  options.spec.fp16_values = c.fp16_values;
  options.spec.exact = c.exact;
  options.spec.chunk_elements = kChunk;
  return options;
}

// Multiples of 1/256 below 16 in magnitude: many need 12 significant bits, so fp16 rounds them,
// and sums of a few dozen stay exact in fp32.
std::vector<float> DyadicGradient(std::mt19937& rng) {
  std::uniform_int_distribution<int> steps(-4095, 4095);
  std::vector<float> g(kN);
  for (float& x : g) x = static_cast<float>(steps(rng)) / 256.0f;
  return g;
}

std::vector<float> Values(const SparseGradient& out) {
  if (out.half_values.empty()) return out.values;
  std::vector<float> values(out.half_values.size());
  for (size_t j = 0; j < values.size(); ++j) values[j] = HalfToFloat(out.half_values[j]);
  return values;
}

// The element indices a push covers, in the order of its values.
std::vector<size_t> Elements(const SparseGradient& out, const CodecSpec& spec, size_t n) {
  std::vector<size_t> elements;
  for (uint32_t id : out.ids) {
    if (spec.codec == proto::TOPK) {
      elements.push_back(id);
    } else {
      const size_t begin = size_t{id} * spec.chunk_elements;
      for (size_t i = 0; i < ChunkLength(n, spec.chunk_elements, id); ++i) {
        elements.push_back(begin + i);
      }
    }
  }
  return elements;
}

// csc's chunks owed: after any push, the chunks sent so far are the whole part of the sum of
// density x chunks over the pushes.
class ChunkLedger {
 public:
  explicit ChunkLedger(size_t chunks) : chunks_(chunks) {}
  size_t Due(double density) {
    owed_ += density * static_cast<double>(chunks_);
    const size_t due = static_cast<size_t>(std::floor(owed_ + 1e-9)) - sent_;
    sent_ += due;
    return due;
  }

 private:
  const size_t chunks_;
  double owed_ = 0;
  size_t sent_ = 0;
};

// Checks one push against the accumulation it was taken from, and the residual it left unless
// `residual` is null (no error feedback). csc sends `chunks_due` chunks.
void CheckPush(const SparseEncoderOptions& options, const std::vector<float>& acc,
               const SparseGradient& out, const std::vector<float>* residual, double density,
               size_t chunks_due) {
  const CodecSpec& spec = options.spec;
  for (size_t j = 1; j < out.ids.size(); ++j) ASSERT_LT(out.ids[j - 1], out.ids[j]);
  if (spec.codec == proto::CSC) {
    ASSERT_EQ(out.ids.size(), chunks_due);
  } else if (spec.exact || out.topk.exact) {
    ASSERT_TRUE(out.topk.exact);
    ASSERT_EQ(out.ids.size(), TopKCount(kN, density));
  } else {
    const size_t k = TopKCount(kN, density);
    ASSERT_GE(out.ids.size(), size_t(std::ceil(k * (1.0 - options.topk.tolerance))));
    ASSERT_LE(out.ids.size(), size_t(std::floor(k * (1.0 + options.topk.tolerance))));
  }
  const std::vector<size_t> elements = Elements(out, spec, kN);
  ASSERT_EQ(out.value_count(), elements.size());
  ASSERT_EQ(spec.fp16_values ? out.values.size() : out.half_values.size(), 0u);
  std::vector<char> sent(kN, 0);
  for (size_t j = 0; j < elements.size(); ++j) {
    const size_t i = elements[j];
    sent[i] = 1;
    if (spec.fp16_values) {
      ASSERT_EQ(out.half_values[j], FloatToHalf(acc[i])) << "element " << i;
    } else {
      ASSERT_EQ(out.values[j], acc[i]) << "element " << i;
    }
    if (residual == nullptr) continue;
    const float kept = spec.fp16_values ? acc[i] - HalfToFloat(FloatToHalf(acc[i])) : 0.0f;
    ASSERT_EQ((*residual)[i], kept) << "element " << i;
  }
  for (size_t i = 0; i < kN && residual != nullptr; ++i) {
    if (!sent[i]) {
      ASSERT_EQ((*residual)[i], acc[i]) << "unsent element " << i;
    }
  }
}

TEST(SparseEncoderTest, ErrorFeedbackConservesEveryGradientExactly) {
  const double densities[] = {0.5, 0.1, 0.02, 1.0, 0.01, 0.3, 0.05, 0.001};
  for (const Config& config : kConfigs) {
    SCOPED_TRACE(config.Name());
    const SparseEncoderOptions options = OptionsFor(config);
    SparseEncoder encoder(kN, options);
    ChunkLedger ledger(NumChunks(kN, kChunk));
    for (float r : encoder.residual()) ASSERT_EQ(r, 0.0f);
    std::mt19937 rng(31);
    std::vector<float> gradients(kN, 0.0f);  // summed
    std::vector<float> delivered(kN, 0.0f);  // what the pushes carried, decoded and summed
    SparseGradient out;
    for (double density : densities) {
      SCOPED_TRACE("density " + std::to_string(density));
      const std::vector<float> g = DyadicGradient(rng);
      std::vector<float> acc = encoder.residual();
      for (size_t i = 0; i < kN; ++i) {
        acc[i] += g[i];
        gradients[i] += g[i];
      }
      encoder.Encode(g.data(), density, &out);
      ASSERT_NO_FATAL_FAILURE(
          CheckPush(options, acc, out, &encoder.residual(), density, ledger.Due(density)));
      const std::vector<size_t> elements = Elements(out, options.spec, kN);
      const std::vector<float> values = Values(out);
      for (size_t j = 0; j < elements.size(); ++j) delivered[elements[j]] += values[j];

      size_t held_back = 0;
      for (size_t i = 0; i < kN; ++i) {
        ASSERT_EQ(delivered[i] + encoder.residual()[i], gradients[i]) << "element " << i;
        held_back += encoder.residual()[i] != 0.0f;
      }
      // The check above is not vacuous: much is held back, and all but fp16's rounding errors
      // when everything is sent.
      if (density < 0.9) {
        EXPECT_GT(held_back, kN / 3);
      } else if (config.fp16_values) {
        EXPECT_GT(held_back, 0u);
      } else {
        EXPECT_EQ(held_back, 0u);
      }
    }
  }
}

TEST(SparseEncoderTest, WithoutErrorFeedbackTheRestIsDropped) {
  for (const Config& config : kConfigs) {
    SCOPED_TRACE(config.Name());
    SparseEncoderOptions options = OptionsFor(config);
    options.error_feedback = false;
    SparseEncoder encoder(kN, options);
    ChunkLedger ledger(NumChunks(kN, kChunk));
    std::mt19937 rng(4);
    SparseGradient out;
    for (double density : {0.1, 0.01, 0.05}) {
      const std::vector<float> g = DyadicGradient(rng);
      encoder.Encode(g.data(), density, &out);
      ASSERT_NO_FATAL_FAILURE(CheckPush(options, g, out, nullptr, density, ledger.Due(density)));
      for (size_t i = 0; i < kN; ++i) ASSERT_EQ(encoder.residual()[i], 0.0f) << i;
    }
  }
}

// TakeResidual hands over what error feedback held back and clears it: right after a push that
// found it clear, exactly the values the push did not send (elastic averaging's worker keeps
// them), so the next push sends only its own gradient.
TEST(SparseEncoderTest, TakeResidualHandsOverWhatWasNotSentAndClearsIt) {
  SparseEncoderOptions options;
  options.spec = *ParseCodecSpec("push_codec", "topk:0.5,exact");
  SparseEncoder encoder(4, options);
  SparseGradient out;
  const float g[] = {4, -1, 0.5f, -3};
  encoder.Encode(g, 0.5, &out);
  EXPECT_EQ(out.ids, (std::vector<uint32_t>{0, 3}));
  std::vector<float> unsent(4, -7.0f);
  encoder.TakeResidual(unsent.data());
  EXPECT_EQ(unsent, (std::vector<float>{0, -1, 0.5f, 0}));
  EXPECT_EQ(encoder.residual(), (std::vector<float>{0, 0, 0, 0}));
  const float next[] = {0, 0.25f, 0, 0};
  encoder.Encode(next, 0.5, &out);
  ASSERT_EQ(out.ids.size(), 2u);
  const size_t at = out.ids[0] == 1 ? 0 : 1;
  ASSERT_EQ(out.ids[at], 1u);
  EXPECT_EQ(out.values[at], 0.25f);  // its own value only, not 0.25 - 1
}

// DGC momentum correction on 4 values, k = 1, mu = 0.5 (u = mu u + g; acc += u; a sent
// coordinate clears both u and acc):
//   push 1: g = (4 1 0 2)  u = (4 1 0 2)        acc = (4 1 0 2)        sends #0 = 4
//   push 2: g = (1 1 3 1)  u = (1 1.5 3 2)      acc = (1 2.5 3 4)      sends #3 = 4
//   push 3: g = 0          u = (.5 .75 1.5 0)   acc = (1.5 3.25 4.5 0) sends all (density 1)
// Without masking, push 2 would carry u0 = 3 (acc0 = 3) and push 3 acc3 = 1.
TEST(SparseEncoderTest, MomentumCorrectionAccumulatesVelocityAndMasksSentValues) {
  SparseEncoderOptions options;
  options.spec.codec = proto::TOPK;
  options.spec.exact = true;
  options.momentum_correction = 0.5f;
  SparseEncoder encoder(4, options);
  SparseGradient out;

  const std::vector<float> g1 = {4, 1, 0, 2};
  encoder.Encode(g1.data(), 0.25, &out);
  EXPECT_EQ(out.ids, (std::vector<uint32_t>{0}));
  EXPECT_EQ(out.values, (std::vector<float>{4}));
  EXPECT_EQ(encoder.residual(), (std::vector<float>{0, 1, 0, 2}));

  const std::vector<float> g2 = {1, 1, 3, 1};
  encoder.Encode(g2.data(), 0.25, &out);
  EXPECT_EQ(out.ids, (std::vector<uint32_t>{3}));
  EXPECT_EQ(out.values, (std::vector<float>{4}));
  EXPECT_EQ(encoder.residual(), (std::vector<float>{1, 2.5, 3, 0}));

  const std::vector<float> g3 = {0, 0, 0, 0};
  encoder.Encode(g3.data(), 1.0, &out);
  EXPECT_EQ(out.ids, (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(out.values, (std::vector<float>{1.5, 3.25, 4.5, 0}));
  EXPECT_EQ(encoder.residual(), (std::vector<float>{0, 0, 0, 0}));
}

TEST(SparseEncoderTest, MomentumCorrectionMasksWholeChunks) {
  SparseEncoderOptions options;
  options.spec.codec = proto::CSC;
  options.spec.chunk_elements = 2;
  options.momentum_correction = 0.5f;
  SparseEncoder encoder(4, options);
  SparseGradient out;
  const std::vector<float> g1 = {4, 2, 1, 1};  // chunk 0 sent; u = (0 0 1 1)
  encoder.Encode(g1.data(), 0.5, &out);
  EXPECT_EQ(out.ids, (std::vector<uint32_t>{0}));
  EXPECT_EQ(out.values, (std::vector<float>{4, 2}));
  const std::vector<float> g2 = {2, 2, 0, 0};  // u = (2 2 .5 .5), acc = (2 2 1.5 1.5)
  encoder.Encode(g2.data(), 0.5, &out);
  EXPECT_EQ(out.ids, (std::vector<uint32_t>{0}));
  EXPECT_EQ(out.values, (std::vector<float>{2, 2}));
  EXPECT_EQ(encoder.residual(), (std::vector<float>{0, 0, 1.5, 1.5}));
}

// sparse_encoder.h's examples: 64 chunks at 5% owe 3.2 chunks a push, so 3 go on 4 pushes of 5
// and 4 on the fifth; 8 chunks at 5% (0.4 a push) still send one chunk every push. What is not
// sent stays in the residual.
TEST(SparseEncoderTest, CscSendsAtLeastOneChunkAndCarriesFractionsAsCredit) {
  for (const auto& [n, want] :
       std::vector<std::pair<size_t, std::vector<size_t>>>{
           {256, {3, 3, 3, 3, 4, 3, 3, 3, 3, 4}}, {32, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1}}}) {
    SparseEncoderOptions options;
    options.spec.codec = proto::CSC;
    options.spec.chunk_elements = 4;
    SparseEncoder encoder(n, options);
    SparseGradient out;
    std::vector<size_t> chunks_sent;
    float sent = 0;
    for (int push = 0; push < 10; ++push) {
      std::vector<float> g(n, 0.0f);
      g[4 * (push % (n / 4)) + 1] = static_cast<float>(push + 1);  // one chunk stands out
      encoder.Encode(g.data(), 0.05, &out);
      chunks_sent.push_back(out.ids.size());
      EXPECT_EQ(out.values.size(), 4 * out.ids.size());
      for (float x : out.values) sent += x;
    }
    EXPECT_EQ(chunks_sent, want) << n;
    float held = 0;
    for (float r : encoder.residual()) held += r;
    EXPECT_EQ(sent + held, 55.0f) << n;  // 1 + ... + 10
    EXPECT_EQ(sent, 55.0f) << n;         // each push's standing-out chunk went at once
  }
}

TEST(SparseEncoderTest, TopKSamplesUnlessExactIsAsked) {
  std::mt19937 rng(77);
  std::normal_distribution<float> normal;
  std::vector<float> g(200000);
  for (float& x : g) x = normal(rng);
  SparseEncoderOptions options;
  options.spec.codec = proto::TOPK;
  SparseGradient out;
  SparseEncoder sampled(g.size(), options);
  sampled.Encode(g.data(), 0.01, &out);
  EXPECT_FALSE(out.topk.exact);
  EXPECT_GE(out.topk.passes, 1u);
  EXPECT_NE(out.ids.size(), 0u);

  options.spec.exact = true;
  SparseEncoder exact(g.size(), options);
  exact.Encode(g.data(), 0.01, &out);
  EXPECT_TRUE(out.topk.exact);
  EXPECT_EQ(out.ids.size(), 2000u);
}

// The encoder tries the last push's threshold in its blocked pass (accumulate, sample, collect);
// what it sends is exactly SelectTopK's choice on the accumulated residual with that guess, and
// the residual keeps the rest. Early on the residual grows push after push and the guess fails
// (the sampled search takes over); once error feedback reaches its steady state (each value sent
// about every 1 / density pushes) the last threshold usually holds and a push is one pass.
TEST(SparseEncoderTest, TopKReusesTheLastThresholdInOnePass) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  const size_t n = 40000;  // two 16K blocks and a short one
  SparseEncoderOptions options;
  options.spec.codec = proto::TOPK;
  options.spec.ratio = 0.01;
  SparseEncoder encoder(n, options);
  std::vector<float> grad(n), accumulated(n, 0.0f);
  uint32_t last = 0;
  int one_pass_late = 0;
  for (int push = 0; push < 400; ++push) {
    for (float& g : grad) g = normal(rng);
    for (size_t i = 0; i < n; ++i) accumulated[i] += grad[i];
    std::vector<uint32_t> want;
    uint32_t chosen = 0;
    SelectTopK(accumulated.data(), n, 400, options.topk, &want, last, &chosen);
    SparseGradient out;
    encoder.Encode(grad.data(), 0.01, &out);
    ASSERT_EQ(out.ids, want) << "push " << push;
    for (size_t j = 0; j < want.size(); ++j) {
      ASSERT_EQ(out.values[j], accumulated[want[j]]);
      accumulated[want[j]] = 0.0f;
    }
    ASSERT_EQ(encoder.residual(), accumulated) << "push " << push;
    one_pass_late += push >= 300 && out.topk.passes == 1;
    last = chosen;
  }
  EXPECT_GE(one_pass_late, 60) << "in the steady state the last threshold usually holds";
}

// Dense ranges (small tensors) go whole in every push besides the top-k selection: each id
// once, in order, and error feedback still conserves the mass exactly.
TEST(SparseEncoderTest, TopKSendsDenseRangesWholeBesidesTheSelection) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  const size_t n = 20000;
  SparseEncoderOptions options;
  options.spec.codec = proto::TOPK;
  options.spec.ratio = 0.01;
  options.dense = {{0, 10}, {5000, 5032}, {19990, 20000}};
  std::vector<float> grad(n);
  for (float& g : grad) g = normal(rng);
  grad[5010] = 1.0f;  // selected by top-k too: sent once
  for (bool exact : {false, true}) {
    options.spec.exact = exact;
    SparseEncoder encoder(n, options);
    SparseGradient out;
    encoder.Encode(grad.data(), 0.01, &out);
    ASSERT_TRUE(std::is_sorted(out.ids.begin(), out.ids.end()));
    ASSERT_EQ(std::adjacent_find(out.ids.begin(), out.ids.end()), out.ids.end()) << "twice";
    std::vector<bool> sent(n, false);
    for (uint32_t id : out.ids) sent[id] = true;
    for (const auto& [begin, end] : options.dense) {
      for (uint32_t i = begin; i < end; ++i) EXPECT_TRUE(sent[i]) << i;
    }
    // Exactly the selection without the ranges, and the ranges.
    SparseEncoderOptions plain = options;
    plain.dense.clear();
    SparseEncoder alone(n, plain);
    SparseGradient selection;
    alone.Encode(grad.data(), 0.01, &selection);
    std::vector<uint32_t> want = selection.ids;
    for (const auto& [begin, end] : options.dense) {
      for (uint32_t i = begin; i < end; ++i) want.push_back(i);
    }
    std::sort(want.begin(), want.end());
    want.erase(std::unique(want.begin(), want.end()), want.end());
    EXPECT_EQ(out.ids, want);
    for (size_t j = 0; j < out.ids.size(); ++j) {
      EXPECT_EQ(out.values[j] + encoder.residual()[out.ids[j]], grad[out.ids[j]]);
      EXPECT_EQ(encoder.residual()[out.ids[j]], 0.0f);
    }
    for (size_t i = 0; i < n; ++i) {
      if (!sent[i]) EXPECT_EQ(encoder.residual()[i], grad[i]) << i;
    }
  }
}

// csc sends the chunks that hold the dense ranges in every push, besides the chunks its norms
// choose: ids in order, each once, whole chunks moved out of the residual.
TEST(SparseEncoderTest, CscSendsTheChunksHoldingDenseRanges) {
  const size_t n = 40;  // 5 chunks of 8
  SparseEncoderOptions options;
  options.spec.codec = proto::CSC;
  options.spec.ratio = 0.2;  // one chunk a push by norm
  options.spec.chunk_elements = 8;
  options.dense = {{1, 2}, {17, 20}};  // in chunks 0 and 2
  SparseEncoder encoder(n, options);
  std::vector<float> grad(n, 0.001f);
  for (size_t i = 32; i < 40; ++i) grad[i] = 1.0f;  // chunk 4 has the largest norm
  grad[0] = 0.5f;  // chunk 0 is second: forced anyway, sent once
  SparseGradient out;
  encoder.Encode(grad.data(), 0.2, &out);
  EXPECT_EQ(out.ids, (std::vector<uint32_t>{0, 2, 4}));
  ASSERT_EQ(out.values.size(), 24u);
  for (size_t j = 0; j < 3; ++j) {
    for (size_t i = 0; i < 8; ++i) {
      EXPECT_EQ(out.values[8 * j + i], grad[8 * out.ids[j] + i]);
      EXPECT_EQ(encoder.residual()[8 * out.ids[j] + i], 0.0f);
    }
  }
  EXPECT_EQ(encoder.residual()[8], 0.001f);  // chunk 1 waits
}

}  // namespace
}  // namespace r2sp::codec
