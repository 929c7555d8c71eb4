// Heterogeneity-aware batching: keeps a smoothed throughput v_i (samples per compute second)
// and communication time c_i (the worker's own push + pull, waiting excluded) per worker from
// its iteration reports, and assigns batch sizes that make every worker's iteration, compute
// plus communication, equally long:
//   b_i / v_i + c_i = K  =>  b_i = v_i (K - c_i),  K = (B + sum v_j c_j) / sum v_j
// (plain b_i proportional to v_i when the c_i are equal), with sum b_i = B, each within
// [min_batch, max_batch]. A worker whose CPU is slower communicates slower too, so evening out
// compute alone would still leave it the straggler of an r2sp ring.
// Workers that report how many iterations they have left (R_i; every worker runs the same
// number of steps) get sizes that make them finish together: one that fell behind (an
// evaluation pause, a batch that was a little large) gets shorter iterations until it has
// caught up instead of training alone at the end,
//   (b_i / v_i + c_i) r_i = F  =>  b_i = v_i (F / r_i - c_i),
//   F = (B + sum v_j c_j) / sum (v_j / r_j),
// with r_i = R_i + finish_horizon, so that the correction fades out instead of growing without
// bound over the last iterations; equal R_i give the equal-iteration split.
// A new assignment is adopted only when every live worker has reported a few iterations under
// the current one and some size would change by more than the hysteresis, so sizes settle
// instead of flapping. Equal iteration times keep the R2SP ring evenly gapped and stop BSP
// waiting for stragglers.
#ifndef R2SP_SCHEDULER_BATCH_TUNER_H_
#define R2SP_SCHEDULER_BATCH_TUNER_H_

#include <cstdint>
#include <vector>

namespace r2sp {

struct BatchTunerOptions {
  int global_batch = 256;   // B. REQUIRES: >= workers * min_batch
  int min_batch = 1;
  int max_batch = 1 << 20;
  double smoothing = 0.2;   // weight of the newest throughput sample
  double hysteresis = 0.10; // adopt only if some size changes by more than this fraction
  int reports_between_changes = 5;  // per live worker, under the current sizes
  int finish_horizon = 50;  // iterations added to every R_i (equal finish)
};

// Proportional split of `total` by `weights` (>= 0), clamped to [lo, hi], summing to `total`
// where the bounds allow (largest-remainder rounding). NaN or negative weights count as 0; +Inf
// ones share alike, the others then count as 0.
std::vector<int> ProportionalSplit(int total, const std::vector<double>& weights, int lo, int hi);

// Not thread-safe (the scheduler calls it under its lock).
class BatchTuner {
 public:
  BatchTuner(const BatchTunerOptions& options, int num_workers);

  // Worker `worker` processed `samples` in `compute_seconds` and spent `comm_seconds` pushing
  // and pulling (ignored unless finite and >= 0), and has `iterations_left` to run, this one
  // included (0: unknown). Returns its batch size from now.
  int Report(int worker, int samples, double compute_seconds, double comm_seconds = 0,
             int64_t iterations_left = 0);
  // The worker left (died or finished); the others share B from the next change on.
  void Remove(int worker);
  // A worker joined with the next rank. It starts with B / (live workers); the sizes sum to B
  // again from the next change on.
  void AddWorker();

  int batch(int worker) const { return batch_[worker]; }
  double throughput(int worker) const { return throughput_[worker]; }
  double comm_seconds(int worker) const { return comm_[worker]; }
  int changes() const { return changes_; }
  // The split that evens out iteration times for the current estimates (what the tuner steers
  // towards), over the live workers, or over all (by their last estimates) with
  // include_departed.
  std::vector<int> Ideal(bool include_departed = false) const;

 private:
  void MaybeRetune();

  const BatchTunerOptions options_;
  std::vector<int> batch_;
  std::vector<double> throughput_;
  std::vector<double> comm_;
  std::vector<int64_t> left_;  // iterations left at the latest report; 0: unknown
  std::vector<int> reports_since_change_;
  std::vector<bool> live_;
  int changes_ = 0;
};

}  // namespace r2sp

#endif  // R2SP_SCHEDULER_BATCH_TUNER_H_
