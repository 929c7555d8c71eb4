// Fuzz target: model files (models/model_file.h) as worker --eval_only and --init=checkpoint:
// read them: DecodeModelFile (header, length, checksum, payload, consistency), then
// CheckModelFits against a small graph with batch norm. Input: a mode byte, then the bytes.
// Mode bit 0: the bytes are a ModelFile payload, encoded with a valid header first (so inputs
// get past the checksum to the consistency checks); else they are the whole file.
#include <cstdint>
#include <string>

#include "models/graph.h"
#include "models/model_file.h"
#include "tests/fuzz/fuzz_input.h"

namespace r2sp::fuzz {
namespace {

// The seeds' model (seeds_decoders.cc builds the same).
const models::Graph& SmallGraph() {
  static const models::Graph* graph = [] {
    models::GraphBuilder b("fuzz", {1, 4, 4}, 3);
    int x = b.Conv(0, "c", 2, 3, 1, 1, false);
    x = b.BatchNorm(x, "bn");
    b.Linear(x, "fc", 3);
    return new models::Graph(b.Finish());
  }();
  return *graph;
}

}  // namespace
}  // namespace r2sp::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace r2sp;
  if (size < 1) return 0;
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    proto::ModelFile payload;
    if (!payload.ParseFromString(bytes)) return 0;
    bytes = models::EncodeModelFile(payload);
  }
  absl::StatusOr<proto::ModelFile> model = models::DecodeModelFile(bytes, "fuzz.r2sp");
  if (model.ok()) (void)models::CheckModelFits(*model, fuzz::SmallGraph(), "fuzz.r2sp");
  return 0;
}
