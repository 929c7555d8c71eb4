// Throughput of the wire codecs against memcpy of the same fp32 buffer, measured interleaved
// (one of each per round) so a noisy moment hits every side of a ratio alike. Each figure is
// the codec's input bytes per second divided by memcpy's: fp16 encode and decode (on the path
// EncodeFp16 picks and on each path this CPU has), and the sparse push encoders as the worker
// runs them (SparseEncoder, error feedback on): top-k at 1% and csc at 5%, each figure covering
// the residual add, the selection and the value gather. Error feedback changes the residual
// every call (unsent values accumulate), as it does in training. The sparse encoders (and the
// memcpy they are compared with) take the --gradients distinct gradients in turn, as training
// pushes a new one every step; with --gradients=1 every push adds the same gradient, so the
// unsent values grow in step and the last push's top-k threshold never holds.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/cli.h"
#include "common/codec/codec_spec.h"
#include "common/codec/csc.h"
#include "common/codec/fp16.h"
#include "common/codec/fp16_delta.h"
#include "common/codec/sparse_encoder.h"
#include "common/codec/topk.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "tools/bench/bench_util.h"

DEFINE_int64(floats, 25000000, "values per buffer");
DEFINE_int32(rounds, 15, "timed rounds (after 2 warm-up rounds)");
DEFINE_string(topk_codec, "topk:0.01", "the top-k push codec timed (a worker --push_codec)");
DEFINE_string(csc_codec, "csc:0.05", "the csc push codec timed (a worker --push_codec)");
DEFINE_int32(sparse_warmup, 0,
             "untimed pushes through the sparse encoders first, so that error feedback reaches "
             "its steady state (each value sent about every 1 / density pushes; a few hundred "
             "at 1%); 0: time the first pushes, while the residual still grows");
DEFINE_int32(gradients, 1, "distinct gradients (seeded) the sparse encoders and memcpy take in "
             "turn, one per push (1: the same gradient every push)");
DEFINE_int64(partition_floats, 0,
             "sparse encoders: one encoder per this many values, as the worker keeps one per "
             "partition (262144 = the scheduler's 1 MiB partitions); 0 = one over the buffer");

namespace r2sp::bench {
namespace {

using codec::SparseGradient;

// The interleaved bodies, in order; the fp16 paths' encode/decode pairs follow kFirstPath.
enum Body { kMemcpy, kFp16Encode, kFp16Decode, kTopK, kCsc, kFp16Delta, kFirstPath };

// A push codec's encoders over the buffer (one per partition, as PsClient keeps them) and what
// the calls so far selected.
class SparseBench {
 public:
  SparseBench(const codec::CodecSpec& spec, size_t n, size_t partition) : spec_(spec), n_(n) {
    codec::SparseEncoderOptions options;
    options.spec = spec;
    options.error_feedback = true;
    for (size_t offset = 0; offset < n; offset += partition) {
      parts_.push_back({offset, std::min(partition, n - offset)});
      encoders_.push_back(std::make_unique<codec::SparseEncoder>(parts_.back().size, options));
    }
    outs_.resize(parts_.size());
  }

  // One push of `grads`: every partition encoded at the codec's ratio. Each encode gets a fresh
  // SparseGradient, as PsClient::EncodeSparse does, so its allocations are timed too.
  void Encode(const float* grads) {
    for (size_t p = 0; p < parts_.size(); ++p) {
      outs_[p] = SparseGradient();
      encoders_[p]->Encode(grads + parts_[p].offset, spec_.ratio, &outs_[p]);
      passes_ += outs_[p].topk.passes;
      max_passes_ = std::max(max_passes_, outs_[p].topk.passes);
      exact_ += outs_[p].topk.exact;
      values_ += outs_[p].value_count();
      ++encodes_;
    }
  }

  // Verifies the last push: ids rise strictly and stay in range, the value count matches them,
  // top-k sent within its tolerance of k (exactly k after an exact selection), csc the density's
  // share of the chunks rounded either way (the encoder may carry the fraction to the next push),
  // and (fp32 values) the sent values left the residual.
  void Verify() const {
    const codec::TopKOptions tolerance;
    for (size_t p = 0; p < parts_.size(); ++p) {
      const SparseGradient& out = outs_[p];
      const size_t n = parts_[p].size;
      const bool topk = spec_.codec == proto::TOPK;
      const size_t limit = topk ? n : codec::NumChunks(n, spec_.chunk_elements);
      size_t values = 0;
      for (size_t j = 0; j < out.ids.size(); ++j) {
        CHECK_LT(out.ids[j], limit);
        if (j > 0) CHECK_GT(out.ids[j], out.ids[j - 1]);
        values += topk ? 1 : codec::ChunkLength(n, spec_.chunk_elements, out.ids[j]);
      }
      CHECK_EQ(out.value_count(), values);
      if (topk) {
        const size_t k = codec::TopKCount(n, spec_.ratio);
        const size_t count = out.ids.size();
        if (out.topk.exact) CHECK_EQ(count, std::min(k, n));
        CHECK_GE(count, static_cast<size_t>(std::ceil(k * (1 - tolerance.tolerance))));
        CHECK_LE(count, static_cast<size_t>(std::floor(k * (1 + tolerance.tolerance))));
      } else {
        const double share = spec_.ratio * codec::NumChunks(n, spec_.chunk_elements);
        CHECK_GE(out.ids.size(), static_cast<size_t>(std::floor(share - 1e-6)));
        CHECK_LE(out.ids.size(), static_cast<size_t>(std::ceil(share + 1e-6)));
      }
      if (!spec_.fp16_values) {
        const std::vector<float>& residual = encoders_[p]->residual();
        for (uint32_t id : out.ids) {
          const size_t begin = topk ? id : size_t{id} * spec_.chunk_elements;
          const size_t end =
              topk ? id + 1 : begin + codec::ChunkLength(n, spec_.chunk_elements, id);
          for (size_t i = begin; i < end; ++i) CHECK_EQ(residual[i], 0.0f) << i;
        }
      }
    }
  }

  size_t ids_sent() const {
    size_t ids = 0;
    for (const SparseGradient& out : outs_) ids += out.ids.size();
    return ids;
  }
  // The fraction of the values sent, over every push so far.
  double mean_density() const { return encodes_ ? double(values_) / n_ / pushes() : 0; }
  size_t partitions() const { return parts_.size(); }
  double mean_passes() const { return encodes_ ? double(passes_) / encodes_ : 0; }
  uint64_t max_passes() const { return max_passes_; }
  uint64_t exact() const { return exact_; }
  uint64_t encodes() const { return encodes_; }
  uint64_t pushes() const { return encodes_ / parts_.size(); }
  // Forgets the pushes so far (warm-up) in the figures above.
  void ResetStats() { passes_ = max_passes_ = exact_ = values_ = encodes_ = 0; }

 private:
  struct Part {
    size_t offset, size;
  };
  const codec::CodecSpec spec_;
  const size_t n_;
  std::vector<Part> parts_;
  std::vector<std::unique_ptr<codec::SparseEncoder>> encoders_;
  std::vector<SparseGradient> outs_;  // each partition's last push
  // Over every encode so far.
  uint64_t passes_ = 0, max_passes_ = 0, exact_ = 0, values_ = 0, encodes_ = 0;
};

codec::CodecSpec SpecOrDie(const char* flag, const std::string& text, proto::Codec want) {
  absl::StatusOr<codec::CodecSpec> spec = codec::ParseCodecSpec(flag, text);
  CHECK(spec.ok()) << spec.status();
  CHECK_EQ(spec->codec, want) << "--" << flag << "=" << text;
  return *spec;
}

// The timed figures of one run: seconds per body per round, and the ratio helpers.
struct Timings {
  std::vector<std::vector<double>> t;
  double fp32_bytes;
  double GBps(int body, double bytes) const { return bytes / Median(t[body]) / 1e9; }
  // Ratio of input-byte throughputs, per round: (in_bytes / t_codec) / (fp32_bytes / t_memcpy).
  double VsMemcpy(int body, double in_bytes) const {
    return MedianRatio(t[kMemcpy], t[body]) * in_bytes / fp32_bytes;
  }
};

void PrintFp16(const Timings& t, const std::vector<codec::Fp16Path>& paths, size_t n) {
  const double fp16_bytes = n * sizeof(uint16_t);
  for (size_t k = 0; k < paths.size(); ++k) {
    const int enc = kFirstPath + 2 * static_cast<int>(k), dec = enc + 1;
    std::printf("fp16 encode %-10s %6.2f GB/s in  (%.2fx memcpy)   decode %6.2f GB/s in  (%.2fx)\n",
                codec::Fp16PathName(paths[k]), t.GBps(enc, t.fp32_bytes),
                t.VsMemcpy(enc, t.fp32_bytes), t.GBps(dec, fp16_bytes),
                t.VsMemcpy(dec, fp16_bytes));
  }
}

void PrintSparse(const Timings& t, int body, const std::string& name, const SparseBench& b) {
  std::printf(
      "%-22s %6.2f GB/s in  (%.2fx memcpy)   %zu partitions, sent %.3f%% of the values on "
      "average over %llu pushes (%zu %s the last)\n",
      (name + " encode").c_str(), t.GBps(body, t.fp32_bytes), t.VsMemcpy(body, t.fp32_bytes),
      b.partitions(), 100 * b.mean_density(), static_cast<unsigned long long>(b.pushes()),
      b.ids_sent(), body == kTopK ? "indices" : "chunks");
  if (body == kTopK) {
    std::printf(
        "%-22s selection over %llu encodes: %.2f passes on average (max %llu), %llu exact "
        "fallbacks\n",
        "", static_cast<unsigned long long>(b.encodes()), b.mean_passes(),
        static_cast<unsigned long long>(b.max_passes()),
        static_cast<unsigned long long>(b.exact()));
  }
}

int Run() {
  const size_t n = static_cast<size_t>(FLAGS_floats);
  CHECK_GT(n, 0u);
  CHECK_GE(FLAGS_partition_floats, 0);
  const size_t partition = FLAGS_partition_floats > 0 ? FLAGS_partition_floats : n;
  const codec::CodecSpec topk_spec = SpecOrDie("topk_codec", FLAGS_topk_codec, proto::TOPK);
  const codec::CodecSpec csc_spec = SpecOrDie("csc_codec", FLAGS_csc_codec, proto::CSC);
  CHECK_GE(FLAGS_gradients, 1);
  std::vector<std::vector<float>> pushed;  // what the sparse encoders and memcpy take in turn
  for (int s = 0; s < FLAGS_gradients; ++s) pushed.push_back(GradientLike(n, 1 + s));
  const std::vector<float>& grads = pushed[0];
  size_t memcpys = 0, topk_pushes = 0, csc_pushes = 0;
  auto next = [&pushed](size_t* calls) { return pushed[(*calls)++ % pushed.size()].data(); };
  std::vector<float> copy(n), decoded(n);
  std::vector<uint16_t> half(n);
  SparseBench topk(topk_spec, n, partition), csc(csc_spec, n, partition);
  std::vector<float> shadow(n);  // an fp16-delta pull's copy, a little behind the weights
  for (size_t i = 0; i < n; ++i) shadow[i] = 0.99f * grads[i];

  std::vector<std::function<void()>> bodies = {
      [&] { std::memcpy(copy.data(), next(&memcpys), n * sizeof(float)); },
      [&] { codec::EncodeFp16(grads.data(), n, half.data()); },
      [&] { codec::DecodeFp16(half.data(), n, decoded.data()); },
      [&] { topk.Encode(next(&topk_pushes)); },
      [&] { csc.Encode(next(&csc_pushes)); },
      [&] { CHECK(codec::EncodeFp16Deltas(grads.data(), n, shadow.data(), half.data())); },
  };
  const std::vector<codec::Fp16Path> paths = codec::AvailableFp16Paths();
  for (codec::Fp16Path p : paths) {
    bodies.push_back([&, p] { codec::EncodeFp16With(p, grads.data(), n, half.data()); });
    bodies.push_back([&, p] { codec::DecodeFp16With(p, half.data(), n, decoded.data()); });
  }
  for (int w = 0; w < FLAGS_sparse_warmup; ++w) {
    topk.Encode(next(&topk_pushes));
    csc.Encode(next(&csc_pushes));
  }
  topk.ResetStats();
  csc.ResetStats();
  const Timings t{InterleavedSeconds(2, FLAGS_rounds, bodies), double(n) * sizeof(float)};
  const std::vector<float>& copied = pushed[(memcpys - 1) % pushed.size()];
  CHECK_EQ(std::memcmp(copy.data(), copied.data(), n * sizeof(float)), 0);  // verify
  topk.Verify();
  csc.Verify();

  const double fp16_bytes = n * sizeof(uint16_t);
  std::printf("%zu floats (%.0f MB fp32), medians of %d interleaved rounds; sparse encoders "
              "after %d untimed pushes, %d distinct gradients pushed in turn\n", n,
              t.fp32_bytes / 1e6, FLAGS_rounds, FLAGS_sparse_warmup, FLAGS_gradients);
  std::printf("memcpy                 %6.2f GB/s\n", t.GBps(kMemcpy, t.fp32_bytes));
  PrintFp16(t, paths, n);
  PrintSparse(t, kTopK, codec::CodecSpecName(topk_spec), topk);
  PrintSparse(t, kCsc, codec::CodecSpecName(csc_spec), csc);
  std::printf("fp16 delta pull encode %6.2f GB/s in  (%.2fx memcpy; the server's side of "
              "--pull_codec=fp16_delta, its copy updated too)\n",
              t.GBps(kFp16Delta, t.fp32_bytes), t.VsMemcpy(kFp16Delta, t.fp32_bytes));
  std::printf(
      "RESULT fp16_enc_vs_memcpy=%.2f fp16_dec_vs_memcpy=%.2f topk_vs_memcpy=%.2f "
      "csc_vs_memcpy=%.2f fp16_delta_enc_vs_memcpy=%.2f fp16_path=%s\n",
      t.VsMemcpy(kFp16Encode, t.fp32_bytes), t.VsMemcpy(kFp16Decode, fp16_bytes),
      t.VsMemcpy(kTopK, t.fp32_bytes), t.VsMemcpy(kCsc, t.fp32_bytes),
      t.VsMemcpy(kFp16Delta, t.fp32_bytes), codec::Fp16PathName(paths.back()));
  return 0;
}

}  // namespace
}  // namespace r2sp::bench

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  // As the worker does: the encoders' per-push buffers then reuse freed memory instead of
  // mapping fresh pages every push.
  r2sp::KeepFreedMemoryForReuse();
  return r2sp::bench::Run();
}
