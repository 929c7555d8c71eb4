// The bound on each peer's outstanding requests; see inbound_limit.h.
#include "common/inbound_limit.h"

namespace r2sp {

bool InboundLimit::Take(absl::string_view process) {
  absl::MutexLock lock(&mu_);
  int& n = outstanding_[process];
  if (n >= max_per_peer_) {
    if (n == 0) outstanding_.erase(process);
    ++refused_;
    return false;
  }
  ++n;
  ++taken_;
  return true;
}

void InboundLimit::Release(absl::string_view process) {
  absl::MutexLock lock(&mu_);
  auto it = outstanding_.find(process);
  if (it != outstanding_.end() && --it->second <= 0) outstanding_.erase(it);
}

int InboundLimit::outstanding(absl::string_view process) const {
  absl::MutexLock lock(&mu_);
  auto it = outstanding_.find(process);
  return it == outstanding_.end() ? 0 : it->second;
}

uint64_t InboundLimit::taken() const {
  absl::MutexLock lock(&mu_);
  return taken_;
}

uint64_t InboundLimit::refused() const {
  absl::MutexLock lock(&mu_);
  return refused_;
}

}  // namespace r2sp
