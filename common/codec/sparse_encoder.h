// A worker's sparse encoder for one partition (top-k or csc), with the state that makes
// sparsification converge:
//  - error feedback: what was not sent stays in a residual and is added to the next gradient,
//    so every gradient is sent eventually (sent + residual == the gradients summed; with fp16
//    values the rounding error stays in the residual too);
//  - optional DGC momentum correction: the worker accumulates velocity u = mu * u + g and
//    sends from the accumulated velocity; sent coordinates clear both (momentum factor
//    masking). The server then applies plain SGD (run it with --momentum=0).
// The density of each push is the caller's (a warm-up schedule lowers it over the first epochs).
// csc sends whole chunks, at least one a push, and a partition may hold only a few (a 1 MiB
// partition has 8 chunks of 32K values: 5% of them is 0.4 chunks, so it sends one, 12.5%). Where
// density x chunks is above one, the fraction is carried as credit from push to push, so the
// chunks sent average it (3.2: three chunks on 4 pushes of 5, four on the fifth).
#ifndef R2SP_COMMON_CODEC_SPARSE_ENCODER_H_
#define R2SP_COMMON_CODEC_SPARSE_ENCODER_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "common/codec/codec_spec.h"
#include "common/codec/csc.h"
#include "common/codec/topk.h"

namespace r2sp::codec {

struct SparseEncoderOptions {
  CodecSpec spec;              // TOPK or CSC
  bool error_feedback = true;  // false: what is not sent is dropped
  float momentum_correction = 0.0f;  // DGC's mu; 0 = off
  TopKOptions topk;
  // [begin, end) ranges of the partition sent whole in every push, besides the selection (small
  // tensors: biases, batch norm; DGC leaves small layers uncompressed); csc sends the chunks
  // that hold them. Increasing, disjoint, within the partition.
  std::vector<std::pair<uint32_t, uint32_t>> dense;
};

// One encoded push: ids (element indices or chunk ids, increasing) and the values they carry,
// as fp32 or fp16 (spec.fp16_values).
struct SparseGradient {
  std::vector<uint32_t> ids;
  std::vector<float> values;         // fp32 values (empty when fp16)
  std::vector<uint16_t> half_values; // fp16 values (empty when fp32)
  TopKStats topk;                    // how the top-k selection went
  size_t value_count() const { return values.size() + half_values.size(); }
};

// Not thread-safe: one partition's pushes are encoded one at a time.
class SparseEncoder {
 public:
  SparseEncoder(size_t num_elements, const SparseEncoderOptions& options);

  // Encodes `grad` (num_elements values) at `density` (the fraction of values or chunks sent,
  // in (0, 1]) into `out`.
  void Encode(const float* grad, double density, SparseGradient* out);

  // What error feedback holds back (all zeros before the first push).
  const std::vector<float>& residual() const { return residual_; }
  // Copies the residual into `out` (num_elements values) and clears it: with error feedback,
  // right after an Encode that found it clear, what that push did not send (elastic averaging
  // keeps it in the worker's copy instead: docs/MODES.md).
  void TakeResidual(float* out);

 private:
  // Adds grad[begin, end) into the residual as the options say (error feedback, velocity, or
  // replacing it).
  void Accumulate(const float* grad, size_t begin, size_t end);
  // Top-k: one blocked pass accumulates, samples and collects against the last push's
  // threshold; if that threshold's count is within the tolerance it is the result, else the
  // sampled search goes on from the sample (FinishTopK): a second pass in the usual case.
  void SelectTopKBlocked(const float* grad, size_t k, SparseGradient* out);
  // csc: accumulating block by block, each chunk's norm taken while it is in cache.
  void SelectChunksInOnePass(const float* grad, double density, SparseGradient* out);
  // Adds dense_ids_ to the selection (sorted, each once).
  void AddDenseIds(std::vector<uint32_t>* ids);
  void TakeValues(SparseGradient* out);
  // TakeValues for csc.
  void TakeChunks(SparseGradient* out);

  const size_t n_;
  const SparseEncoderOptions options_;
  std::vector<float> residual_;  // the gradients (or velocities) accumulated and not yet sent
  std::vector<float> velocity_;  // momentum correction's u
  ChunkCredit chunk_credit_;     // csc
  uint32_t topk_threshold_ = 0;  // the last push's cut (MagnitudeKey), 0 before the first
  std::vector<float> rounded_;   // csc with fp16 values: a chunk as sent, decoded
  // options.dense as ids: its values (top-k) or the chunks that hold them (csc), increasing.
  std::vector<uint32_t> dense_ids_;
  std::vector<uint32_t> merged_;  // the selection and dense_ids_
};

}  // namespace r2sp::codec

#endif  // R2SP_COMMON_CODEC_SPARSE_ENCODER_H_
