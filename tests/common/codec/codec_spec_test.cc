// CodecSpec: parsing every form of --push_codec (case and surrounding whitespace ignored), the
// name written back parsing to the same spec, each malformed form refused naming the flag, and
// the DGC density warm-up.
#include "common/codec/codec_spec.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace r2sp::codec {
namespace {

CodecSpec Parse(const std::string& text) {
  absl::StatusOr<CodecSpec> spec = ParseCodecSpec("push_codec", text);
  EXPECT_TRUE(spec.ok()) << text << ": " << spec.status();
  return spec.ok() ? *spec : CodecSpec();
}

void ExpectSameSpec(const CodecSpec& a, const CodecSpec& b, const std::string& context) {
  EXPECT_EQ(a.codec, b.codec) << context;
  EXPECT_EQ(a.ratio, b.ratio) << context;
  EXPECT_EQ(a.fp16_values, b.fp16_values) << context;
  EXPECT_EQ(a.exact, b.exact) << context;
  EXPECT_EQ(a.chunk_elements, b.chunk_elements) << context;
}

TEST(CodecSpecTest, ParsesDenseCodecs) {
  const CodecSpec fp32 = Parse("fp32");
  EXPECT_EQ(fp32.codec, proto::FP32);
  EXPECT_FALSE(fp32.sparse());
  const CodecSpec fp16 = Parse("fp16");
  EXPECT_EQ(fp16.codec, proto::FP16);
  EXPECT_FALSE(fp16.sparse());
  EXPECT_FALSE(fp16.fp16_values);  // fp16 is a dense codec, not a sparse one's option
  const CodecSpec delta = Parse("FP16_Delta");
  EXPECT_EQ(delta.codec, proto::FP16_DELTA);
  EXPECT_FALSE(delta.sparse());
}

TEST(CodecSpecTest, ParsesTopK) {
  CodecSpec spec = Parse("topk:0.01");
  EXPECT_EQ(spec.codec, proto::TOPK);
  EXPECT_TRUE(spec.sparse());
  EXPECT_EQ(spec.ratio, 0.01);
  EXPECT_FALSE(spec.fp16_values);
  EXPECT_FALSE(spec.exact);

  spec = Parse("topk:0.01,fp16");
  EXPECT_EQ(spec.codec, proto::TOPK);
  EXPECT_EQ(spec.ratio, 0.01);
  EXPECT_TRUE(spec.fp16_values);
  EXPECT_FALSE(spec.exact);

  spec = Parse("topk:0.01,exact");
  EXPECT_TRUE(spec.exact);
  EXPECT_FALSE(spec.fp16_values);

  spec = Parse("topk:1");
  EXPECT_EQ(spec.ratio, 1.0);  // the upper end is allowed
}

TEST(CodecSpecTest, ParsesCsc) {
  CodecSpec spec = Parse("csc:0.05");
  EXPECT_EQ(spec.codec, proto::CSC);
  EXPECT_TRUE(spec.sparse());
  EXPECT_EQ(spec.ratio, 0.05);
  EXPECT_FALSE(spec.fp16_values);
  EXPECT_EQ(spec.chunk_elements, kDefaultChunkElements);

  spec = Parse("csc:0.05,fp16,chunk=1024");
  EXPECT_EQ(spec.codec, proto::CSC);
  EXPECT_EQ(spec.ratio, 0.05);
  EXPECT_TRUE(spec.fp16_values);
  EXPECT_EQ(spec.chunk_elements, 1024u);

  spec = Parse("csc:0.5,chunk=1");
  EXPECT_EQ(spec.chunk_elements, 1u);
  spec = Parse("csc:0.5,chunk=4194304");  // 4 Mi values: the largest chunk allowed
  EXPECT_EQ(spec.chunk_elements, 4194304u);
}

TEST(CodecSpecTest, IgnoresCaseAndSurroundingWhitespace) {
  EXPECT_EQ(Parse("FP32").codec, proto::FP32);
  EXPECT_EQ(Parse("  Fp16\t").codec, proto::FP16);
  CodecSpec spec = Parse(" TopK:0.25,FP16,Exact \n");
  EXPECT_EQ(spec.codec, proto::TOPK);
  EXPECT_EQ(spec.ratio, 0.25);
  EXPECT_TRUE(spec.fp16_values);
  EXPECT_TRUE(spec.exact);
  spec = Parse("CSC:0.1,CHUNK=2048");
  EXPECT_EQ(spec.codec, proto::CSC);
  EXPECT_EQ(spec.chunk_elements, 2048u);
}

TEST(CodecSpecTest, NameRoundTrips) {
  for (const std::string text :
       {"fp32", "fp16", "fp16_delta", "topk:0.01", "topk:0.01,fp16", "topk:0.01,exact", "topk:0.001,fp16,exact",
        "topk:1", "csc:0.05", "csc:0.05,fp16,chunk=1024", "csc:0.5,chunk=32768",
        "csc:0.125,chunk=4194304", "topk:1e-05"}) {
    const CodecSpec spec = Parse(text);
    const std::string name = CodecSpecName(spec);
    ExpectSameSpec(Parse(name), spec, text + " -> " + name);
  }
  EXPECT_EQ(CodecSpecName(Parse("TOPK:0.01,FP16")), "topk:0.01,fp16");
  EXPECT_EQ(CodecSpecName(Parse("csc:0.05,chunk=1024")), "csc:0.05,chunk=1024");
  EXPECT_EQ(CodecSpecName(Parse("csc:0.05,chunk=32768")), "csc:0.05");  // the default is implied
}

TEST(CodecSpecTest, NameRoundTripsAnyRatio) {
  // Specs not read from a flag (a ratio computed elsewhere) must still be named faithfully.
  for (double ratio : {1.0 / 3.0, 0.123456789, 0.01 + 1e-15, 2.5e-7}) {
    for (proto::Codec codec : {proto::TOPK, proto::CSC}) {
      CodecSpec spec;
      spec.codec = codec;
      spec.ratio = ratio;
      const std::string name = CodecSpecName(spec);
      ExpectSameSpec(Parse(name), spec, name);
    }
  }
}

void ExpectRejected(const std::string& text) {
  absl::StatusOr<CodecSpec> spec = ParseCodecSpec("my_codec_flag", text);
  ASSERT_FALSE(spec.ok()) << "accepted '" << text << "'";
  EXPECT_TRUE(absl::IsInvalidArgument(spec.status())) << text << ": " << spec.status();
  EXPECT_NE(spec.status().message().find("my_codec_flag"), std::string::npos) << spec.status();
}

TEST(CodecSpecTest, RejectsMalformedSpecs) {
  for (const std::string text : {
           "",                            // nothing
           "fp64",                        // unknown codec
           "gzip:0.1",                    // unknown codec
           "topk",                        // no ratio
           "topk:",                       // empty ratio
           "csc:",                        // empty ratio
           "topk:0",                      // ratio 0
           "csc:0.0",                     // ratio 0
           "topk:-0.1",                   // negative
           "topk:1.5",                    // ratio > 1
           "csc:2",                       // ratio > 1
           "topk:abc",                    // not a number
           "topk:nan",                    // not in (0, 1]
           "topk:0.01,zip",               // unknown option
           "topk:0.01,",                  // empty option
           "csc:0.05,exact",              // exact is top-k's
           "topk:0.01,chunk=1024",        // chunk is csc's
           "csc:0.05,chunk=0",            // chunk 0
           "csc:0.05,chunk=4194305",      // chunk too big
           "csc:0.05,chunk=99999999999",  // chunk past 2^32
           "csc:0.05,chunk=big",          // chunk not a number
           "csc:0.05,chunk=-1",           // chunk negative
           "csc:0.05,chunk=",             // chunk empty
       }) {
    ExpectRejected(text);
  }
}

TEST(CodecSpecTest, WarmupDensity) {
  const double target = 0.001;
  EXPECT_EQ(WarmupDensity(target, 0.0, 0.0), target);  // no warm-up
  EXPECT_EQ(WarmupDensity(target, 3.0, -1.0), target);
  EXPECT_EQ(WarmupDensity(target, 0.0, 4.0), 1.0);   // dense at the start
  EXPECT_EQ(WarmupDensity(target, -1.0, 4.0), 1.0);  // never denser than dense
  EXPECT_NEAR(WarmupDensity(target, 2.0, 4.0), std::sqrt(target), 1e-12);  // halfway
  EXPECT_NEAR(WarmupDensity(target, 1.0, 4.0), std::pow(target, 0.25), 1e-12);
  EXPECT_EQ(WarmupDensity(target, 4.0, 4.0), target);
  EXPECT_EQ(WarmupDensity(target, 17.5, 4.0), target);

  double previous = 1.0;
  for (double epochs = 0.0; epochs <= 6.0; epochs += 0.0625) {
    const double density = WarmupDensity(target, epochs, 4.0);
    EXPECT_LE(density, previous) << "at " << epochs << " epochs";
    EXPECT_GE(density, target) << "at " << epochs << " epochs";
    EXPECT_LE(density, 1.0);
    previous = density;
  }
  EXPECT_EQ(previous, target);
}

}  // namespace
}  // namespace r2sp::codec
