// See partition_state.h.
#include "server/partition_state.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "common/codec/fp16.h"
#include "glog/logging.h"

namespace r2sp {

PartitionState::PartitionState(size_t num_elements)
    : num_elements_(num_elements),
      current_(std::make_shared<Buffer>(num_elements)),
      momentum_(num_elements, 0.0f) {}

bool PartitionState::Init(const float* values) {
  if (initialized_) return false;
  std::memcpy(current_->values.data(), values, bytes());
  initialized_ = true;
  half_version_ = -1;
  foreseen_ = Foreseen();
  return true;
}

void PartitionState::Restore(const float* weights, const float* momentum,
                             const float* second_moment, int64_t version, int64_t updates) {
  // A fresh buffer: a frame of the old one may still be on its way to a worker.
  current_ = std::make_shared<Buffer>(num_elements_);
  std::memcpy(current_->values.data(), weights, bytes());
  if (momentum != nullptr) {
    std::memcpy(momentum_.data(), momentum, bytes());
  } else {
    std::fill(momentum_.begin(), momentum_.end(), 0.0f);
  }
  if (second_moment != nullptr) {
    second_.assign(second_moment, second_moment + num_elements_);
  } else {
    second_.clear();
  }
  script_state_ = momentum != nullptr || second_moment != nullptr;
  std::fill(step_.begin(), step_.end(), 0.0f);
  initialized_ = true;
  version_ = version;
  skipped_ = version - updates;
  half_version_ = -1;
  foreseen_ = Foreseen();
}

PartitionState::Buffer* PartitionState::OutputBuffer() {
  DCHECK(initialized_);
  if (current_->in_flight.load(std::memory_order_acquire) == 0) return current_.get();
  if (spare_ == nullptr || spare_->in_flight.load(std::memory_order_acquire) != 0) {
    spare_ = std::make_shared<Buffer>(num_elements_);
  }
  return spare_.get();
}

void PartitionState::Commit(Buffer* out) {
  if (out != current_.get()) std::swap(current_, spare_);
  ++version_;
}

void PartitionState::ApplyDense(const SgdOptions& options, float scale, const float* grad,
                                size_t begin, size_t length, Buffer* out) {
  const float* in = current_->values.data() + begin;
  float* w = out->values.data() + begin;
  if (step_.empty()) {
    SgdApply(options, scale, grad, in, w, momentum_.data() + begin, length);
  } else {
    SgdApplyKeepingStep(options, scale, grad, in, w, momentum_.data() + begin,
                        step_.data() + begin, length);
  }
}

void PartitionState::ForRange(const RangePool::Body& body) {
  if (pool_ == nullptr || pool_->threads() == 1 || num_elements_ < 2 * kApplyPiece) {
    body(0, num_elements_);
  } else {
    pool_->Run(num_elements_, kApplyPiece, body);
  }
}

void PartitionState::Apply(const SgdOptions& options, float scale, const float* grad) {
  Buffer* out = OutputBuffer();
  ForRange([&](size_t begin, size_t end) {
    ApplyDense(options, scale, grad + begin, begin, end - begin, out);
  });
  Commit(out);
}

void PartitionState::ApplyForeseeing(const SgdOptions& options, float scale, const float* grad,
                                     const Prediction& foresee) {
  if (step_.empty()) {
    Apply(options, scale, grad);
    return;
  }
  Buffer* out = OutputBuffer();
  std::shared_ptr<Buffer> predicted = FreePredictedBuffer();
  const float* in = current_->values.data();
  ForRange([&](size_t begin, size_t end) {
    SgdApplyPredicting(options, scale, foresee, grad + begin, in + begin,
                       out->values.data() + begin, momentum_.data() + begin,
                       step_.data() + begin, predicted->values.data() + begin, end - begin);
  });
  Commit(out);
  foreseen_ = Foreseen{std::move(predicted), version_, foresee};
}

void PartitionState::Apply(const SgdOptions& options, float scale, const wire::GradientView& grad) {
  DCHECK_EQ(grad.num_elements, num_elements_);
  if (grad.kind == wire::GradientView::Kind::kDense) {
    Apply(options, scale, grad.dense);
    return;
  }
  Buffer* out_buffer = OutputBuffer();
  const float* in = current_->values.data();
  float* out = out_buffer->values.data();
  float* m = momentum_.data();
  float* step = step_.empty() ? nullptr : step_.data();
  if (grad.kind == wire::GradientView::Kind::kSparse) {
    SgdApplyNoGradient(options, scale, in, out, m, step, num_elements_);
    SgdAddSparse(options, scale, grad.ids, grad.values, grad.count, out, m, step);
  } else {
    // Dense runs: the chunks get the ordinary update, the gaps between them the zero-gradient one.
    size_t done = 0;
    auto decay_to = [&](size_t end) {
      SgdApplyNoGradient(options, scale, in + done, out + done, m + done,
                         step == nullptr ? nullptr : step + done, end - done);
    };
    grad.ForEachChunk([&](size_t begin, size_t length, const float* values) {
      decay_to(begin);
      ApplyDense(options, scale, values, begin, length, out_buffer);
      done = begin + length;
    });
    decay_to(num_elements_);
  }
  Commit(out_buffer);
}

void PartitionState::Apply(const std::vector<wire::OptimizerRun>& runs, float scale,
                           float fraction, double steps, const wire::GradientView& grad) {
  DCHECK_EQ(grad.num_elements, num_elements_);
  const float* g = grad.dense;
  if (grad.kind != wire::GradientView::Kind::kDense) {
    dense_.assign(num_elements_, 0.0f);
    if (grad.kind == wire::GradientView::Kind::kSparse) {
      for (size_t j = 0; j < grad.count; ++j) dense_[grad.ids[j]] = grad.values[j];
    } else {
      grad.ForEachChunk([this](size_t begin, size_t length, const float* values) {
        std::copy(values, values + length, dense_.begin() + begin);
      });
    }
    g = dense_.data();
  }
  for (const wire::OptimizerRun& run : runs) {
    const proto::OptimizerKind kind = run.settings.kind();
    if ((kind == proto::OPTIMIZER_ADAM || kind == proto::OPTIMIZER_ADAMW) && second_.empty()) {
      second_.assign(num_elements_, 0.0f);
    }
  }
  script_state_ = true;
  Buffer* out = OutputBuffer();
  const float* in = current_->values.data();
  const ScriptUpdate update{scale, fraction, updates() + 1, steps};
  ForRange([&](size_t begin, size_t end) {
    for (const wire::OptimizerRun& run : runs) {
      const size_t lo = std::max(begin, run.begin), hi = std::min(end, run.end);
      if (lo >= hi) continue;
      ApplyScriptOptimizer(run.settings, update, g + lo, in + lo, out->values.data() + lo,
                           momentum_.data() + lo, second_.empty() ? nullptr : &second_[lo],
                           hi - lo);
    }
  });
  Commit(out);
}

void PartitionState::Skip() {
  DCHECK(initialized_);
  ++version_;
  ++skipped_;
}

void PartitionState::Skip(const std::vector<wire::OptimizerRun>& runs) {
  DCHECK(initialized_);
  const bool averages = std::any_of(runs.begin(), runs.end(), [](const wire::OptimizerRun& r) {
    return r.settings.kind() == proto::OPTIMIZER_AVERAGE;
  });
  if (!averages) {
    Skip();
    return;
  }
  Buffer* out = OutputBuffer();
  if (out != current_.get()) out->values = current_->values;
  for (const wire::OptimizerRun& run : runs) {
    if (run.settings.kind() != proto::OPTIMIZER_AVERAGE) continue;
    std::fill(out->values.begin() + run.begin, out->values.begin() + run.end,
              std::numeric_limits<float>::quiet_NaN());
  }
  Commit(out);
  ++skipped_;
}

void PartitionState::Add(const float* delta) {
  Buffer* out = OutputBuffer();
  const float* in = current_->values.data();
  float* w = out->values.data();
  ForRange([&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) w[i] = in[i] + delta[i];
  });
  Commit(out);
}

void PartitionState::Add(const wire::GradientView& delta) {
  DCHECK_EQ(delta.num_elements, num_elements_);
  if (delta.kind == wire::GradientView::Kind::kDense) {
    Add(delta.dense);
    return;
  }
  Buffer* out = OutputBuffer();
  float* w = out->values.data();
  if (w != current_->values.data()) {
    std::memcpy(w, current_->values.data(), num_elements_ * sizeof(float));
  }
  if (delta.kind == wire::GradientView::Kind::kSparse) {
    for (size_t j = 0; j < delta.count; ++j) w[delta.ids[j]] += delta.values[j];
  } else {
    delta.ForEachChunk([w](size_t begin, size_t length, const float* values) {
      for (size_t i = 0; i < length; ++i) w[begin + i] += values[i];
    });
  }
  Commit(out);
}

zmq::message_t PartitionState::PullFrame() { return FrameOver(current_); }

zmq::message_t PartitionState::Fp16PullFrame() {
  if (half_version_ != version_) {  // -1 until the first fp16 pull, and again after Init
    if (half_ == nullptr || half_->in_flight.load(std::memory_order_acquire) != 0) {
      half_ = std::make_shared<HalfBuffer>(num_elements_);
    }
    codec::EncodeFp16(current_->values.data(), num_elements_, half_->values.data());
    half_version_ = version_;
  }
  return FrameOver(half_);
}

std::shared_ptr<PartitionState::Buffer> PartitionState::FreePredictedBuffer() {
  for (const std::shared_ptr<Buffer>& b : predicted_) {
    if (b->in_flight.load(std::memory_order_acquire) == 0 &&
        (b != foreseen_.weights || foreseen_.version != version_)) {
      return b;
    }
  }
  predicted_.push_back(std::make_shared<Buffer>(num_elements_));
  return predicted_.back();
}

zmq::message_t PartitionState::PredictedPullFrame(const Prediction& p) {
  if (foreseen_.version == version_ && foreseen_.prediction.momentum_coeff == p.momentum_coeff &&
      foreseen_.prediction.step_coeff == p.step_coeff) {
    return FrameOver(foreseen_.weights);
  }
  if (step_.empty()) step_.assign(num_elements_, 0.0f);
  std::shared_ptr<Buffer> out = FreePredictedBuffer();
  ForRange([&](size_t begin, size_t end) {
    PredictWeights(p, current_->values.data() + begin, momentum_.data() + begin,
                   step_.data() + begin, out->values.data() + begin, end - begin);
  });
  return FrameOver(out);
}

zmq::message_t PartitionState::PredictedScriptFrame(const std::vector<wire::OptimizerRun>& runs,
                                                   double steps, float fraction, int updates) {
  std::shared_ptr<Buffer> out = FreePredictedBuffer();
  const float* second = second_.empty() ? nullptr : second_.data();
  for (const wire::OptimizerRun& run : runs) {
    PredictScriptRun(run.settings, steps, fraction, updates, current_->values.data() + run.begin,
                     momentum_.data() + run.begin, second == nullptr ? nullptr : second + run.begin,
                     out->values.data() + run.begin, run.end - run.begin);
  }
  return FrameOver(out);
}

template <typename T>
zmq::message_t PartitionState::FrameOver(const std::shared_ptr<BufferOf<T>>& buffer) {
  buffer->in_flight.fetch_add(1, std::memory_order_relaxed);
  auto* hold = new std::shared_ptr<BufferOf<T>>(buffer);
  return zmq::message_t(buffer->values.data(), buffer->values.size() * sizeof(T),
                        &PartitionState::ReleaseFrame<T>, hold);
}

template <typename T>
void PartitionState::ReleaseFrame(void* /*data*/, void* hint) {
  auto* hold = static_cast<std::shared_ptr<BufferOf<T>>*>(hint);
  (*hold)->in_flight.fetch_sub(1, std::memory_order_release);
  delete hold;
}

}  // namespace r2sp
