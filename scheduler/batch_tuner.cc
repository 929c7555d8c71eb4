// See batch_tuner.h.
#include "scheduler/batch_tuner.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "glog/logging.h"

namespace r2sp {
namespace {

// The weights scaled by the largest, so that no product or sum overflows into Inf and then
// NaN (a NaN share has no integer size). NaN and negative weights count as 0; if some are
// +Inf, those share alike and the finite ones count as 0.
std::vector<double> UsableWeights(const std::vector<double>& weights) {
  double largest = 0;
  for (double w : weights) largest = w > largest ? w : largest;
  std::vector<double> out(weights.size(), 0.0);
  if (!(largest > 0)) return out;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (std::isinf(largest)) {
      out[i] = weights[i] == largest ? 1.0 : 0.0;
    } else if (weights[i] > 0) {
      out[i] = weights[i] / largest;
    }
  }
  return out;
}

}  // namespace

std::vector<int> ProportionalSplit(int total, const std::vector<double>& raw_weights, int lo,
                                   int hi) {
  const std::vector<double> weights = UsableWeights(raw_weights);
  const size_t n = weights.size();
  std::vector<double> share(n, 0.0);
  std::vector<bool> fixed(n, false);
  // Water-filling: clamp the shares that leave [lo, hi], give the rest out proportionally again.
  for (size_t round = 0; round <= n; ++round) {
    double left = total, weight = 0;
    for (size_t i = 0; i < n; ++i) {
      if (fixed[i]) left -= share[i];
      else weight += weights[i];
    }
    bool clamped = false;
    for (size_t i = 0; i < n; ++i) {
      if (fixed[i]) continue;
      share[i] = weight > 0 ? left * weights[i] / weight : left / n;
      if (share[i] < lo || share[i] > hi) {
        share[i] = std::clamp<double>(share[i], lo, hi);
        fixed[i] = true;
        clamped = true;
      }
    }
    if (!clamped) break;
  }
  std::vector<int> out(n);
  int sum = 0;
  for (size_t i = 0; i < n; ++i) {
    out[i] = std::clamp(static_cast<int>(std::floor(share[i])), lo, hi);
    sum += out[i];
  }
  // Largest remainders get the units still missing (never past hi).
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return share[a] - std::floor(share[a]) > share[b] - std::floor(share[b]);
  });
  for (size_t k = 0; sum < total && n > 0; k = (k + 1) % n) {
    bool any = false;
    for (size_t j = 0; j < n && sum < total; ++j) {
      const size_t i = order[(k + j) % n];
      if (out[i] < hi) {
        ++out[i];
        ++sum;
        any = true;
        break;
      }
    }
    if (!any) break;
  }
  return out;
}

BatchTuner::BatchTuner(const BatchTunerOptions& options, int num_workers)
    : options_(options),
      throughput_(num_workers, 0.0),
      comm_(num_workers, 0.0),
      left_(num_workers, 0),
      reports_since_change_(num_workers, 0),
      live_(num_workers, true) {
  batch_ = ProportionalSplit(options.global_batch, std::vector<double>(num_workers, 1.0),
                             options.min_batch, options.max_batch);
}

int BatchTuner::Report(int worker, int samples, double compute_seconds, double comm_seconds,
                       int64_t iterations_left) {
  left_[worker] = std::max<int64_t>(0, iterations_left);
  // A compute time so short that the throughput overflows would hold it at +Inf for good.
  const double v = samples / compute_seconds;
  if (samples > 0 && compute_seconds > 0 && std::isfinite(v)) {
    const bool first = throughput_[worker] == 0;
    const double a = options_.smoothing;
    throughput_[worker] = first ? v : (1 - a) * throughput_[worker] + a * v;
    if (std::isfinite(comm_seconds) && comm_seconds >= 0) {
      comm_[worker] = first ? comm_seconds : (1 - a) * comm_[worker] + a * comm_seconds;
    }
    ++reports_since_change_[worker];
    MaybeRetune();
  }
  return batch_[worker];
}

void BatchTuner::Remove(int worker) {
  if (!live_[worker]) return;
  live_[worker] = false;
  std::fill(reports_since_change_.begin(), reports_since_change_.end(), 0);
}

void BatchTuner::AddWorker() {
  int live = 1;
  for (bool l : live_) live += l;
  batch_.push_back(std::clamp(options_.global_batch / live, options_.min_batch, options_.max_batch));
  throughput_.push_back(0.0);
  comm_.push_back(0.0);
  left_.push_back(0);
  reports_since_change_.push_back(0);
  live_.push_back(true);
}

std::vector<int> BatchTuner::Ideal(bool include_departed) const {
  // Equal finish: b_i = v_i (F / r_i - c_i), F = (B + sum v_j c_j) / sum (v_j / r_j), where
  // r_i = R_i + horizon if every member reported R_i, else r_i = 1 (equal iteration times,
  // F = K). Those real shares (a negative one, for a worker whose communication alone outlasts
  // its iteration, becomes 0 and min_batch) are the weights of the rounded, clamped split.
  std::vector<size_t> members;
  bool all_known = true;
  for (size_t i = 0; i < live_.size(); ++i) {
    if (!live_[i] && !include_departed) continue;
    members.push_back(i);
    all_known = all_known && left_[i] > 0;
  }
  auto r = [&](size_t i) {
    return all_known ? static_cast<double>(left_[i]) + options_.finish_horizon : 1.0;
  };
  double sum_v_over_r = 0, sum_vc = 0;
  for (size_t i : members) {
    sum_v_over_r += throughput_[i] / r(i);
    sum_vc += throughput_[i] * comm_[i];
  }
  const double f = sum_v_over_r > 0 ? (options_.global_batch + sum_vc) / sum_v_over_r : 0;
  std::vector<double> weights;
  for (size_t i : members) {
    weights.push_back(std::max(0.0, throughput_[i] * (f / r(i) - comm_[i])));
  }
  std::vector<int> split = ProportionalSplit(options_.global_batch, weights, options_.min_batch,
                                             options_.max_batch);
  std::vector<int> out(live_.size(), 0);
  for (size_t i = 0, next = 0; i < live_.size(); ++i) {
    if (live_[i] || include_departed) out[i] = split[next++];
  }
  return out;
}

void BatchTuner::MaybeRetune() {
  for (size_t i = 0; i < live_.size(); ++i) {
    if (live_[i] && reports_since_change_[i] < options_.reports_between_changes) return;
  }
  const std::vector<int> target = Ideal();
  double largest = 0;
  for (size_t i = 0; i < live_.size(); ++i) {
    if (!live_[i]) continue;
    largest = std::max(largest, std::abs(target[i] - batch_[i]) / std::max(1.0, 1.0 * batch_[i]));
  }
  std::fill(reports_since_change_.begin(), reports_since_change_.end(), 0);
  if (largest <= options_.hysteresis) return;
  for (size_t i = 0; i < live_.size(); ++i) {
    if (live_[i]) batch_[i] = target[i];
  }
  ++changes_;
  std::string sizes;
  for (size_t i = 0; i < live_.size(); ++i) {
    if (live_[i]) sizes += " w" + std::to_string(i) + "=" + std::to_string(batch_[i]);
  }
  LOG(INFO) << "batch sizes:" << sizes;
}

}  // namespace r2sp
