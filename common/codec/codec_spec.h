// What a worker's --push_codec flag asks for: the wire encoding of its gradients (fp32, fp16,
// top-k or coarse-grained chunks) with the knobs each one has. Parsed once at start-up; the
// name written back is what summary.json records.
#ifndef R2SP_COMMON_CODEC_CODEC_SPEC_H_
#define R2SP_COMMON_CODEC_CODEC_SPEC_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "proto/messages.pb.h"

namespace r2sp::codec {

// GradientFlow's default chunk: 32K values (128 KiB of fp32).
inline constexpr uint32_t kDefaultChunkElements = 32 * 1024;

struct CodecSpec {
  proto::Codec codec = proto::FP32;  // FP32, FP16, TOPK, CSC, or FP16_DELTA (pulls only)
  // TOPK and CSC: the fraction of values (top-k) or of chunks (csc) sent, in (0, 1].
  double ratio = 1.0;
  // TOPK and CSC: the sent values travel as fp16 (the rounding error stays in the residual).
  bool fp16_values = false;
  // TOPK: exactly the k largest magnitudes, by full selection (slow; for tests and baselines)
  // instead of DGC's sampled threshold.
  bool exact = false;
  uint32_t chunk_elements = kDefaultChunkElements;  // CSC

  bool sparse() const { return codec == proto::TOPK || codec == proto::CSC; }
};

// "fp32", "fp16", "topk:RATIO[,fp16][,exact]", "csc:RATIO[,fp16][,chunk=N]" or "fp16_delta"
// (pulls only: the caller refuses it for pushes), any case. `flag` names the flag in errors.
absl::StatusOr<CodecSpec> ParseCodecSpec(const std::string& flag, const std::string& text);
// The canonical text of a spec (ParseCodecSpec reads it back to the same spec).
std::string CodecSpecName(const CodecSpec& spec);

// The density warm-up (DGC): a sparse codec's density after `epochs_done` (fractional) epochs,
// falling geometrically from 1 (dense) to `target` over `warmup_epochs`, then `target`.
// warmup_epochs <= 0: always `target`.
double WarmupDensity(double target, double epochs_done, double warmup_epochs);

}  // namespace r2sp::codec

#endif  // R2SP_COMMON_CODEC_CODEC_SPEC_H_
