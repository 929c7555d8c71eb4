// See leave_flag.h.
#include "worker/leave_flag.h"

namespace r2sp {

void LeaveFlag::Request(const std::string& why) {
  absl::MutexLock lock(&mu_);
  if (why_.empty()) why_ = why.empty() ? "asked to leave" : why;
}

bool LeaveFlag::requested() const {
  absl::MutexLock lock(&mu_);
  return !why_.empty();
}

std::string LeaveFlag::why() const {
  absl::MutexLock lock(&mu_);
  return why_;
}

void LeaveFlag::SetLeft() {
  absl::MutexLock lock(&mu_);
  left_ = true;
}

bool LeaveFlag::left() const {
  absl::MutexLock lock(&mu_);
  return left_;
}

}  // namespace r2sp
