// Per-worker copies behind fp16-delta pulls.
#include "server/pull_shadows.h"

#include <cstring>

#include "common/codec/fp16_delta.h"
#include "glog/logging.h"

namespace r2sp {

PullShadows::PullShadows(size_t num_elements, int num_workers)
    : num_elements_(num_elements), shadows_(num_workers) {}

PullShadows::Reply PullShadows::Answer(int rank, uint64_t base, zmq::message_t weights) {
  CHECK_GE(rank, 0);
  CHECK_LT(rank, static_cast<int>(shadows_.size()));
  CHECK_EQ(weights.size(), num_elements_ * sizeof(float));
  Shadow& shadow = shadows_[rank];
  const float* target = static_cast<const float*>(weights.data());
  if (shadow.seq != 0 && base == shadow.seq) {
    zmq::message_t half(num_elements_ * sizeof(uint16_t));
    if (codec::EncodeFp16Deltas(target, num_elements_, shadow.values.data(),
                                static_cast<uint16_t*>(half.data()))) {
      ++shadow.seq;
      return Reply{proto::FP16_DELTA, std::move(half), shadow.seq};
    }
    // A delta beyond binary16's range: the whole weights, and the copy starts again.
  }
  shadow.values.resize(num_elements_);
  std::memcpy(shadow.values.data(), target, num_elements_ * sizeof(float));
  ++shadow.seq;  // never the base of a copy the worker had before
  return Reply{proto::FP32, std::move(weights), shadow.seq};
}

size_t PullShadows::bytes() const {
  size_t total = 0;
  for (const Shadow& s : shadows_) total += s.values.size() * sizeof(float);
  return total;
}

}  // namespace r2sp
