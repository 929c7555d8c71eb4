// The bound on the requests each peer process may have outstanding at a transport (received,
// not yet answered: parked pulls, waits at a barrier), so one peer cannot queue without limit.
#ifndef R2SP_COMMON_INBOUND_LIMIT_H_
#define R2SP_COMMON_INBOUND_LIMIT_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace r2sp {

// Thread-safe.
class InboundLimit {
 public:
  // REQUIRES: max_per_peer >= 0.
  explicit InboundLimit(int max_per_peer) : max_per_peer_(max_per_peer) {}

  InboundLimit(const InboundLimit&) = delete;
  InboundLimit& operator=(const InboundLimit&) = delete;

  // A request came in from `process`: counts it and returns true, or, with max_per_peer of its
  // requests outstanding already, counts a refusal and returns false.
  bool Take(absl::string_view process) ABSL_LOCKS_EXCLUDED(mu_);
  // A request from `process` was answered. Answers to requests never taken are ignored.
  void Release(absl::string_view process) ABSL_LOCKS_EXCLUDED(mu_);

  int outstanding(absl::string_view process) const ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t taken() const ABSL_LOCKS_EXCLUDED(mu_);    // Take calls that returned true
  uint64_t refused() const ABSL_LOCKS_EXCLUDED(mu_);  // Take calls that returned false

 private:
  const int max_per_peer_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, int> outstanding_ ABSL_GUARDED_BY(mu_);  // by process
  uint64_t taken_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t refused_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace r2sp

#endif  // R2SP_COMMON_INBOUND_LIMIT_H_
