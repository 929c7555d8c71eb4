// See codec_spec.h.
#include "common/codec/codec_spec.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace r2sp::codec {
namespace {

// The largest chunk a CSC push may use (4 Mi values, 16 MiB of fp32).
constexpr uint32_t kMaxChunkElements = 1u << 22;

absl::Status BadSpec(const std::string& flag, const std::string& text, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "--", flag, "=", text, ": ", why,
      " (want fp32, fp16, topk:RATIO[,fp16][,exact], csc:RATIO[,fp16][,chunk=N] or, for pulls, "
      "fp16_delta)"));
}

// The shortest %g text (6 significant digits at least, as StrCat writes) that reads back to
// `ratio`, so CodecSpecName's text parses to the same spec whatever the ratio.
std::string RatioText(double ratio) {
  char text[32];
  for (int digits = 6; digits < 17; ++digits) {
    std::snprintf(text, sizeof(text), "%.*g", digits, ratio);
    double back;
    if (absl::SimpleAtod(text, &back) && back == ratio) return text;
  }
  std::snprintf(text, sizeof(text), "%.17g", ratio);
  return text;
}

}  // namespace

absl::StatusOr<CodecSpec> ParseCodecSpec(const std::string& flag, const std::string& text) {
  const std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  CodecSpec spec;
  if (lower == "fp32") return spec;
  if (lower == "fp16") {
    spec.codec = proto::FP16;
    return spec;
  }
  if (lower == "fp16_delta") {
    spec.codec = proto::FP16_DELTA;
    return spec;
  }
  std::vector<std::string> parts = absl::StrSplit(lower, ',');
  absl::string_view head = parts[0];
  if (absl::ConsumePrefix(&head, "topk:")) {
    spec.codec = proto::TOPK;
  } else if (absl::ConsumePrefix(&head, "csc:")) {
    spec.codec = proto::CSC;
  } else {
    return BadSpec(flag, text, "unknown codec");
  }
  if (!absl::SimpleAtod(head, &spec.ratio) || !(spec.ratio > 0.0 && spec.ratio <= 1.0)) {
    return BadSpec(flag, text, "the ratio must be a number in (0, 1]");
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    absl::string_view option = parts[i];
    if (option == "fp16") {
      spec.fp16_values = true;
    } else if (option == "exact" && spec.codec == proto::TOPK) {
      spec.exact = true;
    } else if (absl::ConsumePrefix(&option, "chunk=") && spec.codec == proto::CSC) {
      if (!absl::SimpleAtoi(option, &spec.chunk_elements) || spec.chunk_elements == 0 ||
          spec.chunk_elements > kMaxChunkElements) {
        return BadSpec(flag, text,
                       absl::StrCat("chunk must be an integer in [1, ", kMaxChunkElements, "]"));
      }
    } else {
      return BadSpec(flag, text, absl::StrCat("unknown option '", parts[i], "'"));
    }
  }
  return spec;
}

double WarmupDensity(double target, double epochs_done, double warmup_epochs) {
  if (warmup_epochs <= 0 || epochs_done >= warmup_epochs) return target;
  return std::pow(target, std::max(0.0, epochs_done) / warmup_epochs);
}

std::string CodecSpecName(const CodecSpec& spec) {
  switch (spec.codec) {
    case proto::FP32:
      return "fp32";
    case proto::FP16:
      return "fp16";
    case proto::FP16_DELTA:
      return "fp16_delta";
    default:
      break;
  }
  std::string name =
      absl::StrCat(spec.codec == proto::TOPK ? "topk:" : "csc:", RatioText(spec.ratio));
  if (spec.fp16_values) absl::StrAppend(&name, ",fp16");
  if (spec.exact) absl::StrAppend(&name, ",exact");
  if (spec.codec == proto::CSC && spec.chunk_elements != kDefaultChunkElements) {
    absl::StrAppend(&name, ",chunk=", spec.chunk_elements);
  }
  return name;
}

}  // namespace r2sp::codec
