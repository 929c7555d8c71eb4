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
  if (in->in_flight.load(std::memory_order_acquire) == 0) {
    SgdApply(options, scale, grad, in->values.data(), in->values.data(), momentum_.data(),
             num_elements_);
  } else {
    if (spare_ == nullptr || spare_->in_flight.load(std::memory_order_acquire) != 0) {
      spare_ = std::make_shared<Buffer>(num_elements_);
    }
    SgdApply(options, scale, grad, in->values.data(), spare_->values.data(), momentum_.data(),
             num_elements_);
    std::swap(current_, spare_);
  }
  ++version_;
}

zmq::message_t PartitionState::PullFrame() {
  current_->in_flight.fetch_add(1, std::memory_order_relaxed);
  auto* hold = new std::shared_ptr<Buffer>(current_);
  return zmq::message_t(current_->values.data(), bytes(), &PartitionState::ReleaseFrame, hold);
}

void PartitionState::ReleaseFrame(void* /*data*/, void* hint) {
  auto* hold = static_cast<std::shared_ptr<Buffer>*>(hint);
  (*hold)->in_flight.fetch_sub(1, std::memory_order_release);
  delete hold;
}

}  // namespace r2sp
