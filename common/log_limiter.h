// Rate limiting for warnings a peer can trigger at will (a flood of bad requests must not flood
// the log): at most one line per period, which says how many were suppressed since the last.
#ifndef R2SP_COMMON_LOG_LIMITER_H_
#define R2SP_COMMON_LOG_LIMITER_H_

#include <cstdint>

#include "absl/time/time.h"

namespace r2sp {

// Not thread-safe: guard it with the caller's lock, or keep it to one thread.
class LogLimiter {
 public:
  explicit LogLimiter(absl::Duration period = absl::Seconds(1)) : period_(period) {}

  // Whether to log an event happening at `now`; if so, `*suppressed` says how many events were
  // not logged since the last line.
  bool ShouldLog(absl::Time now, int64_t* suppressed) {
    if (now - last_ < period_) {
      ++suppressed_;
      return false;
    }
    last_ = now;
    *suppressed = suppressed_;
    suppressed_ = 0;
    return true;
  }

 private:
  const absl::Duration period_;
  absl::Time last_ = absl::InfinitePast();
  int64_t suppressed_ = 0;
};

}  // namespace r2sp

#endif  // R2SP_COMMON_LOG_LIMITER_H_
