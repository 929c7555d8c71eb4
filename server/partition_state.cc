// See partition_state.h.
#include "server/partition_state.h"

#include <cstring>

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
  return true;
}

void PartitionState::Apply(const SgdOptions& options, float scale, const float* grad) {
  DCHECK(initialized_);
  Buffer* in = current_.get();
  Buffer* out = in;
  if (in->in_flight.load(std::memory_order_acquire) != 0) {
    if (spare_ == nullptr || spare_->in_flight.load(std::memory_order_acquire) != 0) {
      spare_ = std::make_shared<Buffer>(num_elements_);
    }
    out = spare_.get();
  }
  if (step_.empty()) {
    SgdApply(options, scale, grad, in->values.data(), out->values.data(), momentum_.data(),
             num_elements_);
  } else {
    SgdApplyKeepingStep(options, scale, grad, in->values.data(), out->values.data(),
                        momentum_.data(), step_.data(), num_elements_);
  }
  if (out != in) std::swap(current_, spare_);
  ++version_;
}

zmq::message_t PartitionState::PullFrame() { return FrameOver(current_); }

zmq::message_t PartitionState::PredictedPullFrame(const Prediction& p) {
  if (step_.empty()) step_.assign(num_elements_, 0.0f);
  std::shared_ptr<Buffer> out;
  for (const std::shared_ptr<Buffer>& b : predicted_) {
    if (b->in_flight.load(std::memory_order_acquire) == 0) {
      out = b;
      break;
    }
  }
  if (out == nullptr) {
    out = std::make_shared<Buffer>(num_elements_);
    predicted_.push_back(out);
  }
  PredictWeights(p, current_->values.data(), momentum_.data(), step_.data(), out->values.data(),
                 num_elements_);
  return FrameOver(out);
}

zmq::message_t PartitionState::FrameOver(const std::shared_ptr<Buffer>& buffer) {
  buffer->in_flight.fetch_add(1, std::memory_order_relaxed);
  auto* hold = new std::shared_ptr<Buffer>(buffer);
  return zmq::message_t(buffer->values.data(), buffer->values.size() * sizeof(float),
                        &PartitionState::ReleaseFrame, hold);
}

void PartitionState::ReleaseFrame(void* /*data*/, void* hint) {
  auto* hold = static_cast<std::shared_ptr<Buffer>*>(hint);
  (*hold)->in_flight.fetch_sub(1, std::memory_order_release);
  delete hold;
}

}  // namespace r2sp
