// The PUSH wire format (common/wire/push_frames.h). Each encoder's push decodes to the gradient
// it was given (fp32, fp16 from fp32 or encoded already, top-k and csc with fp32 or fp16
// values); a small push of each kind has pinned bytes (the wire format must not change); every
// codec decodes to the view the optimizer consumes, and every malformed push is refused with
// InvalidArgument before anything is applied: wrong frame counts and sizes, unknown codecs and
// value codecs, ids unsorted, duplicated or out of range, bad chunk sizes, values that do not
// match the ids, non-finite values, sparse initial values.
#include "common/wire/push_frames.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "common/codec/fp16.h"
#include "gtest/gtest.h"
#include "tests/testing/fakes.h"

namespace r2sp::wire {
namespace {

using testing::WorkerRequest;

template <typename T>
zmq::message_t Frame(const std::vector<T>& v) {
  return zmq::message_t(v.data(), v.size() * sizeof(T));
}

std::vector<uint16_t> Half(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  codec::EncodeFp16(v.data(), v.size(), h.data());
  return h;
}

// A TOPK push of (ids, fp32 values), or a CSC push with chunk `chunk` when chunk > 0.
Message Sparse(const std::vector<uint32_t>& ids, const std::vector<float>& values,
               uint32_t chunk = 0) {
  Message m = WorkerRequest(proto::PUSH, 0, 0);
  m.header.set_codec(chunk > 0 ? proto::CSC : proto::TOPK);
  if (chunk > 0) m.header.mutable_push()->set_chunk_elements(chunk);
  m.payload.push_back(Frame(ids));
  m.payload.push_back(Frame(values));
  return m;
}

class PushDecoderTest : public ::testing::Test {
 protected:
  // Expects InvalidArgument whose message contains `what`.
  void ExpectRefused(const Message& m, size_t n, const std::string& what) {
    absl::StatusOr<GradientView> g = decoder_.Decode(m, n);
    ASSERT_FALSE(g.ok()) << what;
    EXPECT_TRUE(absl::IsInvalidArgument(g.status())) << g.status();
    EXPECT_NE(std::string(g.status().message()).find(what), std::string::npos) << g.status();
  }
  PushDecoder decoder_;
};

TEST_F(PushDecoderTest, DenseFp32AndFp16) {
  const std::vector<float> v = {1, -2, 0.5f, 3};
  Message fp32 = WorkerRequest(proto::PUSH, 0, 0);
  fp32.payload.push_back(Frame(v));
  absl::StatusOr<GradientView> g = decoder_.Decode(fp32, 4);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->kind, GradientView::Kind::kDense);
  EXPECT_EQ(g->dense, fp32.payload[0].data());  // zero-copy
  Message fp16 = WorkerRequest(proto::PUSH, 0, 0);
  fp16.header.set_codec(proto::FP16);
  fp16.payload.push_back(Frame(Half(v)));
  g = decoder_.Decode(fp16, 4);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(std::vector<float>(g->dense, g->dense + 4), v);
}

TEST_F(PushDecoderTest, TopKKeepsPairsAndDecodesFp16Values) {
  Message m = Sparse({0, 5, 9}, {});
  m.header.mutable_push()->set_values(proto::FP16);
  m.payload[1] = Frame(Half({1.5f, -2, 0.25f}));
  absl::StatusOr<GradientView> g = decoder_.Decode(m, 10);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->kind, GradientView::Kind::kSparse);
  ASSERT_EQ(g->count, 3u);
  EXPECT_EQ(std::vector<uint32_t>(g->ids, g->ids + 3), (std::vector<uint32_t>{0, 5, 9}));
  EXPECT_EQ(std::vector<float>(g->values, g->values + 3), (std::vector<float>{1.5f, -2, 0.25f}));
}

TEST_F(PushDecoderTest, CscChunksIncludingAShortLastOne) {
  // 10 values in chunks of 4: chunks 0 (4 values), 1 (4), 2 (2). Send chunks 0 and 2.
  Message m = Sparse({0, 2}, {1, 2, 3, 4, 9, 10}, /*chunk=*/4);
  absl::StatusOr<GradientView> g = decoder_.Decode(m, 10);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->kind, GradientView::Kind::kChunks);
  std::vector<float> dense(10, 0.0f);
  g->ForEachChunk([&](size_t begin, size_t length, const float* values) {
    for (size_t i = 0; i < length; ++i) dense[begin + i] = values[i];
  });
  EXPECT_EQ(dense, (std::vector<float>{1, 2, 3, 4, 0, 0, 0, 0, 9, 10}));
  // Without the short chunk, two whole ones.
  ASSERT_TRUE(decoder_.Decode(Sparse({0, 1}, std::vector<float>(8, 1.0f), 4), 10).ok());
  // An empty push (nothing cleared the cut) is valid for both.
  ASSERT_TRUE(decoder_.Decode(Sparse({}, {}, 4), 10).ok());
  ASSERT_TRUE(decoder_.Decode(Sparse({}, {}), 10).ok());
}

TEST_F(PushDecoderTest, RefusesMalformedDensePushes) {
  Message wrong = WorkerRequest(proto::PUSH, 0, 0);
  wrong.payload.push_back(Frame(std::vector<float>(3)));
  ExpectRefused(wrong, 4, "must carry one frame of 16 bytes");
  Message two = WorkerRequest(proto::PUSH, 0, 0);
  two.payload.push_back(Frame(std::vector<float>(2)));
  two.payload.push_back(Frame(std::vector<float>(2)));
  ExpectRefused(two, 4, "in 2 frames");
  Message unknown = WorkerRequest(proto::PUSH, 0, 0);
  unknown.header.set_codec(static_cast<proto::Codec>(42));
  unknown.payload.push_back(Frame(std::vector<float>(4)));
  ExpectRefused(unknown, 4, "unknown codec");
  Message nan = WorkerRequest(proto::PUSH, 0, 0);
  nan.payload.push_back(Frame(std::vector<float>{0, std::nanf(""), 0, 0}));
  ExpectRefused(nan, 4, "non-finite");
}

TEST_F(PushDecoderTest, RefusesMalformedTopK) {
  ExpectRefused(Sparse({1, 1}, {1, 2}), 10, "must rise strictly");  // duplicate
  ExpectRefused(Sparse({3, 1}, {1, 2}), 10, "must rise strictly");  // unsorted
  ExpectRefused(Sparse({1, 10}, {1, 2}), 10, "out of range");       // index == n
  ExpectRefused(Sparse({0xffffffffu}, {1}), 10, "out of range");
  ExpectRefused(Sparse({1, 2}, {1}), 10, "value frame must hold 8 bytes");  // count mismatch
  ExpectRefused(Sparse({1, 2}, {1, 2, 3}), 10, "value frame must hold 8 bytes");
  ExpectRefused(Sparse({1, 2}, {1, std::numeric_limits<float>::infinity()}), 10, "non-finite");
  Message ragged = Sparse({1, 2}, {1, 2});
  ragged.payload[0] = zmq::message_t(ragged.payload[0].data(), 7);  // truncated id frame
  ExpectRefused(ragged, 10, "not a whole number of u32");
  Message one_frame = Sparse({1}, {1});
  one_frame.payload.pop_back();
  ExpectRefused(one_frame, 10, "must carry 2 frames");
  Message bad_values = Sparse({1}, {1});
  bad_values.header.mutable_push()->set_values(proto::TOPK);
  ExpectRefused(bad_values, 10, "values must be FP32 or FP16");
  Message half_mismatch = Sparse({1, 2}, {1, 2});  // fp32-sized frame declared fp16
  half_mismatch.header.mutable_push()->set_values(proto::FP16);
  ExpectRefused(half_mismatch, 10, "value frame must hold 4 bytes");
  Message init = Sparse({1}, {1});
  init.header.mutable_push()->set_init(true);
  ExpectRefused(init, 10, "initial values must be dense");
  Message half_inf = Sparse({1}, {});
  half_inf.header.mutable_push()->set_values(proto::FP16);
  half_inf.payload[1] = Frame(std::vector<uint16_t>{0x7c00});  // +Inf in binary16
  ExpectRefused(half_inf, 10, "non-finite");
}

TEST_F(PushDecoderTest, RefusesMalformedCsc) {
  ExpectRefused(Sparse({0}, {1, 2, 3, 4}, 0), 10, "");  // chunk 0 reads as topk: size wrong
  Message zero_chunk = Sparse({0}, {1, 2, 3, 4}, 4);
  zero_chunk.header.mutable_push()->set_chunk_elements(0);
  ExpectRefused(zero_chunk, 10, "chunk_elements must be > 0");
  ExpectRefused(Sparse({3}, {1, 2}, 4), 10, "out of range");  // only chunks 0..2
  ExpectRefused(Sparse({1, 1}, std::vector<float>(8), 4), 10, "must rise strictly");
  ExpectRefused(Sparse({2, 0}, std::vector<float>(6), 4), 10, "must rise strictly");
  ExpectRefused(Sparse({0, 2}, std::vector<float>(8), 4), 10, "must hold 24 bytes");  // short last
  ExpectRefused(Sparse({0}, std::vector<float>(3), 4), 10, "must hold 16 bytes");
  ExpectRefused(Sparse({0}, {1, 2, std::nanf(""), 4}, 4), 10, "non-finite");
}

TEST_F(PushDecoderTest, MisalignedFramesAreCopiedNotMisread) {
  // Frames that start at an odd address (zero-copy frames over a buffer, as a transport may
  // hand them over): ids and values must be read through aligned copies.
  alignas(8) uint8_t id_bytes[1 + 2 * sizeof(uint32_t)];
  alignas(8) uint8_t value_bytes[1 + 2 * sizeof(float)];
  const uint32_t ids[2] = {2, 7};
  const float values[2] = {0.5f, -0.5f};
  std::memcpy(id_bytes + 1, ids, sizeof(ids));
  std::memcpy(value_bytes + 1, values, sizeof(values));
  Message m = Sparse({}, {});
  m.payload[0] = zmq::message_t(id_bytes + 1, sizeof(ids), nullptr, nullptr);
  m.payload[1] = zmq::message_t(value_bytes + 1, sizeof(values), nullptr, nullptr);
  absl::StatusOr<GradientView> g = decoder_.Decode(m, 8);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(g->ids) % alignof(uint32_t), 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(g->values) % alignof(float), 0u);
  EXPECT_EQ(g->ids[1], 7u);
  EXPECT_EQ(g->values[1], -0.5f);
}

// The gradient a decoded view describes, dense.
std::vector<float> Densify(const GradientView& g) {
  std::vector<float> dense(g.num_elements, 0.0f);
  if (g.kind == GradientView::Kind::kDense) {
    dense.assign(g.dense, g.dense + g.num_elements);
  } else if (g.kind == GradientView::Kind::kSparse) {
    for (size_t j = 0; j < g.count; ++j) dense[g.ids[j]] = g.values[j];
  } else {
    g.ForEachChunk([&](size_t begin, size_t length, const float* values) {
      for (size_t i = 0; i < length; ++i) dense[begin + i] = values[i];
    });
  }
  return dense;
}

// The header frame and each payload frame, in hex, as they go on the wire.
std::string WireHex(Message& m) {
  zmq::message_t header = EncodeHeader(m);
  std::string hex = absl::BytesToHexString(
      absl::string_view(static_cast<const char*>(header.data()), header.size()));
  for (const zmq::message_t& frame : m.payload) {
    hex += " " + absl::BytesToHexString(
                     absl::string_view(static_cast<const char*>(frame.data()), frame.size()));
  }
  return hex;
}

const PushFields kFields{/*key=*/3, /*rank=*/1, /*clock=*/7, /*init=*/false, /*scale=*/0.5f};

TEST(PushFramesTest, Fp32RoundTripBorrowsTheValues) {
  const std::vector<float> v = {1, -2, 0.5f, 3};
  Message m = EncodeFp32Push(kFields, v.data(), v.size());
  EXPECT_EQ(m.header.type(), proto::PUSH);
  EXPECT_EQ(m.header.sender_role(), proto::WORKER);
  EXPECT_EQ(m.header.sender_rank(), 1);
  EXPECT_EQ(m.header.key(), 3u);
  EXPECT_EQ(m.header.clock(), 7);
  EXPECT_EQ(m.header.codec(), proto::FP32);
  EXPECT_EQ(m.header.push().scale(), 0.5f);
  EXPECT_FALSE(m.header.push().init());
  ASSERT_EQ(m.payload.size(), 1u);
  EXPECT_EQ(m.payload[0].data(), v.data());  // zero-copy
  PushDecoder decoder;
  absl::StatusOr<GradientView> g = decoder.Decode(m, v.size());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(Densify(*g), v);
}

TEST(PushFramesTest, Fp16RoundTripsFromFp32AndFromEncodedValues) {
  const std::vector<float> v = {1, -2, 0.5f, 3.25f};  // exact in binary16
  Message from_fp32 = EncodeFp16Push(kFields, v.data(), v.size());
  EXPECT_EQ(from_fp32.header.codec(), proto::FP16);
  ASSERT_EQ(from_fp32.payload.size(), 1u);
  EXPECT_EQ(from_fp32.payload[0].size(), 8u);
  PushDecoder decoder;
  absl::StatusOr<GradientView> g = decoder.Decode(from_fp32, v.size());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(Densify(*g), v);

  const std::vector<uint16_t> half = Half(v);
  Message encoded = EncodeEncodedFp16Push(kFields, half.data(), half.size());
  EXPECT_EQ(encoded.header.codec(), proto::FP16);
  EXPECT_EQ(encoded.payload[0].data(), half.data());  // zero-copy
  g = decoder.Decode(encoded, v.size());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(Densify(*g), v);
}

// A sparse encoder's output, as SparseEncoder::Encode fills it.
codec::SparseGradient Encoded(const std::vector<uint32_t>& ids, const std::vector<float>& values,
                              bool fp16) {
  codec::SparseGradient e;
  e.ids = ids;
  if (fp16) {
    e.half_values = Half(values);
  } else {
    e.values = values;
  }
  return e;
}

TEST(PushFramesTest, TopKRoundTripsWithFp32AndFp16Values) {
  for (bool fp16 : {false, true}) {
    codec::CodecSpec spec;
    spec.codec = proto::TOPK;
    spec.fp16_values = fp16;
    const codec::SparseGradient e = Encoded({1, 4}, {0.5f, -1.5f}, fp16);
    Message m = EncodeSparsePush(kFields, spec, e);
    EXPECT_EQ(m.header.codec(), proto::TOPK);
    EXPECT_EQ(m.header.push().values(), fp16 ? proto::FP16 : proto::FP32);
    EXPECT_EQ(m.header.push().chunk_elements(), 0u);
    ASSERT_EQ(m.payload.size(), 2u);
    EXPECT_NE(m.payload[0].data(), e.ids.data());  // copied: the encoder reuses its buffers
    PushDecoder decoder;
    absl::StatusOr<GradientView> g = decoder.Decode(m, 6);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(Densify(*g), (std::vector<float>{0, 0.5f, 0, 0, -1.5f, 0})) << fp16;
  }
}

TEST(PushFramesTest, CscRoundTripsWithFp32AndFp16Values) {
  for (bool fp16 : {false, true}) {
    codec::CodecSpec spec;
    spec.codec = proto::CSC;
    spec.fp16_values = fp16;
    spec.chunk_elements = 2;
    // 5 values in chunks of 2: send chunk 0 and the short last chunk 2.
    const codec::SparseGradient e = Encoded({0, 2}, {1, 2, 5}, fp16);
    Message m = EncodeSparsePush(kFields, spec, e);
    EXPECT_EQ(m.header.codec(), proto::CSC);
    EXPECT_EQ(m.header.push().chunk_elements(), 2u);
    PushDecoder decoder;
    absl::StatusOr<GradientView> g = decoder.Decode(m, 5);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(Densify(*g), (std::vector<float>{1, 2, 0, 0, 5})) << fp16;
  }
}

// A lossless csc push of chosen chunks: the chunks' values whole (the short last one too), fp32
// or fp16; no chunk at all is a zero gradient.
TEST(PushFramesTest, ChunksPushesRoundTripTheChosenChunksWhole) {
  const std::vector<float> values = {1, 2, 0, 0, 5};  // chunks of 2: {1,2} {0,0} {5}
  for (bool fp16 : {false, true}) {
    Message m = EncodeChunksPush(kFields, values.data(), 5, 2, {0, 2}, fp16);
    EXPECT_EQ(m.header.codec(), proto::CSC);
    EXPECT_EQ(m.header.push().chunk_elements(), 2u);
    EXPECT_EQ(m.header.push().values(), fp16 ? proto::FP16 : proto::FP32);
    EXPECT_EQ(PayloadBytes(m), 2 * 4 + 3 * (fp16 ? 2 : 4));
    PushDecoder decoder;
    absl::StatusOr<GradientView> g = decoder.Decode(m, 5);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(Densify(*g), values) << fp16;
    Message none = EncodeChunksPush(kFields, values.data(), 5, 2, {}, fp16);
    g = decoder.Decode(none, 5);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(Densify(*g), (std::vector<float>(5, 0.0f))) << fp16;
  }
}

TEST(PushFramesTest, InitPushesAreFp32WithTheInitFlag) {
  const std::vector<float> v = {4, 5};
  Message m = EncodeFp32Push(PushFields{9, 0, 0, /*init=*/true, 0.0f}, v.data(), v.size());
  EXPECT_TRUE(m.header.push().init());
  EXPECT_EQ(m.header.push().scale(), 0.0f);
  PushDecoder decoder;
  absl::StatusOr<GradientView> g = decoder.Decode(m, 2);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(Densify(*g), v);
}

// The bytes of small pushes, pinned: a change here changes the wire format. The header frame
// reads: 08 06 type PUSH, 20 03 sender_role WORKER, 28 sender_rank, 30 key, 38 clock, 42
// payload_bytes (packed), 58 codec, ca01 push {08 init, 15 scale (fixed32), 18 values, 20
// chunk_elements}; then each payload frame.
TEST(PushFramesTest, BytesOnTheWireArePinned) {
  const std::vector<float> v = {1, -2};
  Message fp32 = EncodeFp32Push(kFields, v.data(), v.size());
  EXPECT_EQ(WireHex(fp32), "08062003280130033807420108ca0105150000003f 0000803f000000c0");
  Message fp16 = EncodeFp16Push(kFields, v.data(), v.size());
  EXPECT_EQ(WireHex(fp16), "080620032801300338074201045801ca0105150000003f 003c00c0");
  Message init = EncodeFp32Push(PushFields{0, 2, 0, true, 0.0f}, v.data(), v.size());
  EXPECT_EQ(WireHex(init), "080620032802420108ca01020801 0000803f000000c0");
  codec::CodecSpec topk;
  topk.codec = proto::TOPK;
  topk.fp16_values = true;
  Message sparse = EncodeSparsePush(kFields, topk, Encoded({1}, {0.5f}, true));
  EXPECT_EQ(WireHex(sparse), "08062003280130033807420204025802ca0107150000003f1801 01000000 0038");
  codec::CodecSpec csc;
  csc.codec = proto::CSC;
  csc.chunk_elements = 4;
  Message chunks = EncodeSparsePush(kFields, csc, Encoded({0}, {1, 2, 3, 4}, false));
  EXPECT_EQ(WireHex(chunks),
            "08062003280130033807420204105803ca0107150000003f2004 00000000 "
            "0000803f000000400000404000008040");
}

}  // namespace
}  // namespace r2sp::wire
