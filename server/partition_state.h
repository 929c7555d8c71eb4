// One partition as its server holds it: fp32 weights with a momentum buffer (and Adam's second
// moment, once a script's Adam updates it), a version (updates applied), and zero-copy pull
// frames. A pull sends the current weight buffer
// itself; an update that finds that buffer still being sent writes the new weights into a
// spare buffer instead (copy-on-write without the copy), so pulls never see torn values.
// Once a worker asks for predicted weights (r2sp delay compensation), updates also keep their
// gradient term so a pull can answer with where the weights will be a few pushes later.
#ifndef R2SP_SERVER_PARTITION_STATE_H_
#define R2SP_SERVER_PARTITION_STATE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/wire/gradient_view.h"
#include "common/wire/optimizer_runs.h"
#include "server/range_pool.h"
#include "server/script_optimizer.h"
#include "server/sgd.h"
#include "zmq.hpp"

namespace r2sp {

// Thread-safety: all methods are for one thread (the server's I/O thread); libzmq's threads
// only release frames, which is safe concurrently.
class PartitionState {
 public:
  // With a pool, a partition of at least 2 pieces runs in pieces of this many elements (128
  // KiB): each a pass long enough to outweigh the hand-over, and a multiple of every vector
  // width, so each element takes the code path it takes in one pass.
  static constexpr size_t kApplyPiece = 32768;

  explicit PartitionState(size_t num_elements);

  size_t num_elements() const { return num_elements_; }
  size_t bytes() const { return num_elements_ * sizeof(float); }
  bool initialized() const { return initialized_; }
  int64_t version() const { return version_; }
  // Optimizer updates applied: version() less the bsp clocks every worker skipped (Skip).
  int64_t updates() const { return version_ - skipped_; }

  // Sets the initial weights (first call wins; returns false if already initialised).
  bool Init(const float* values);
  // Applies one update with `grad` (scaled by `scale`); version += 1.
  // REQUIRES: initialized().
  void Apply(const SgdOptions& options, float scale, const float* grad);
  // Apply that also computes, in the same pass, the weights `foresee` predicts from the state
  // it leaves (what the pushing worker's next pull asks for, r2sp) and keeps them, so that a
  // PredictedPullFrame with the same prediction before the next update sends them without a
  // pass of its own. Plain Apply until a pull asked for predicted weights (no step term yet).
  void ApplyForeseeing(const SgdOptions& options, float scale, const float* grad,
                       const Prediction& foresee);
  // The same for a gradient of any kind: sparse ones without a dense copy (the untouched
  // weights get the zero-gradient update, see SgdApplyNoGradient).
  void Apply(const SgdOptions& options, float scale, const wire::GradientView& grad);
  // One update with the training script's optimizer, run by run (script_optimizer.h; the
  // update's number is version() + 1; `steps`: the partition's global-batch steps with it), of
  // a gradient of any kind (sparse ones made dense: the untouched values get a zero gradient,
  // as torch would give them). version += 1.
  // REQUIRES: initialized(); runs as wire::DecodeOptimizerRuns gives them for this partition.
  void Apply(const std::vector<wire::OptimizerRun>& runs, float scale, float fraction,
             double steps, const wire::GradientView& grad);
  // A bsp clock every worker skipped (proto PushInfo.skip): no update, version += 1 (the
  // clock's pulls are answered with the weights as they are). REQUIRES: initialized().
  void Skip();
  // The same for a partition the script's `runs` update: an AVERAGE run's values (the clock's
  // averaged gradient) become NaN, for there is no average; the other runs keep theirs.
  void Skip(const std::vector<wire::OptimizerRun>& runs);
  // Elastic averaging's centre update: weights += delta, no optimizer (momentum untouched);
  // version += 1. REQUIRES: initialized().
  void Add(const float* delta);
  // The same for a sparse delta (kSparse, kChunks: the values at their ids; the rest unchanged).
  void Add(const wire::GradientView& delta);
  // A frame over the current weights, valid even while later updates run.
  zmq::message_t PullFrame();
  // The same rounded to binary16 (fp16 pulls): encoded once per version, shared by every pull
  // of that version.
  zmq::message_t Fp16PullFrame();
  // A frame of the weights predicted by `p` (server/sgd.h PredictWeights) from the current
  // weights, momentum and the latest update's gradient term: the ones ApplyForeseeing kept
  // when it foresaw `p` for this version, else computed now. The first call starts keeping
  // that term (until then it counts as zero): one more buffer per update, only for jobs that
  // use prediction.
  zmq::message_t PredictedPullFrame(const Prediction& p);
  // The same for a partition a script's optimizer updates: the weights after `updates` more
  // updates of `fraction` each, moving as its latest moments say (PredictScriptRun), at the
  // partition's `steps`.
  zmq::message_t PredictedScriptFrame(const std::vector<wire::OptimizerRun>& runs, double steps,
                                      float fraction, int updates);
  // The current weights (for tests and checkpoints).
  const float* weights() const { return current_->values.data(); }
  const float* momentum() const { return momentum_.data(); }
  // Whether the momentum buffer holds a script optimizer's state (a script's update, or a
  // restore that brought a momentum or second moment), which checkpoints keep in every mode.
  bool keeps_script_state() const { return script_state_; }
  // Adam's exp_avg_sq, or null before a script's Adam or AdamW updated this partition.
  const float* second_moment() const { return second_.empty() ? nullptr : second_.data(); }
  // Sets weights, momentum and second moment (null: zeros; none), version and updates (<=
  // version) from a checkpoint; initialised after.
  void Restore(const float* weights, const float* momentum, const float* second_moment,
               int64_t version, int64_t updates);
  // Dense updates and predicted weights of large partitions run on `pool`'s threads (null: on
  // the caller's), with the same results bit for bit. The pool outlives this.
  void set_pool(RangePool* pool) { pool_ = pool; }

 private:
  template <typename T>
  struct BufferOf {
    explicit BufferOf(size_t n) : values(n) {}
    std::vector<T> values;
    std::atomic<int> in_flight{0};  // frames libzmq has not released yet
  };
  using Buffer = BufferOf<float>;
  using HalfBuffer = BufferOf<uint16_t>;
  // The buffer an update writes: the current one, or a spare while the current is being sent.
  Buffer* OutputBuffer();
  void Commit(Buffer* out);  // makes `out` current after an update
  // The ordinary update of [begin, begin + length) with `grad` (that range's values) into `out`.
  void ApplyDense(const SgdOptions& options, float scale, const float* grad, size_t begin,
                  size_t length, Buffer* out);
  // A buffer of predicted weights no frame holds and no foreseen prediction uses.
  std::shared_ptr<Buffer> FreePredictedBuffer();
  template <typename T>
  static void ReleaseFrame(void* data, void* hint);
  template <typename T>
  static zmq::message_t FrameOver(const std::shared_ptr<BufferOf<T>>& buffer);

  // Calls body(begin, end) over [0, num_elements_): in pieces on the pool's threads, or whole.
  void ForRange(const RangePool::Body& body);

  const size_t num_elements_;
  RangePool* pool_ = nullptr;
  std::shared_ptr<Buffer> current_;
  std::shared_ptr<Buffer> spare_;  // may be null or still in flight
  std::vector<float> momentum_;
  std::vector<float> second_;  // Adam's exp_avg_sq; empty until an Adam update
  bool script_state_ = false;  // keeps_script_state()
  std::vector<float> dense_;   // a sparse gradient made dense, for script optimizers
  std::vector<float> step_;  // the latest update's gradient term; empty until a prediction
  std::vector<std::shared_ptr<Buffer>> predicted_;  // frames of predicted weights, reused
  // The weights ApplyForeseeing predicted (one of predicted_), valid while version_ is theirs.
  struct Foreseen {
    std::shared_ptr<Buffer> weights;
    int64_t version = -1;
    Prediction prediction;
  } foreseen_;
  std::shared_ptr<HalfBuffer> half_;  // the binary16 weights of version half_version_
  int64_t half_version_ = -1;
  bool initialized_ = false;
  int64_t version_ = 0;
  int64_t skipped_ = 0;  // clocks skipped by every worker: version_ - updates()
};

}  // namespace r2sp

#endif  // R2SP_SERVER_PARTITION_STATE_H_
