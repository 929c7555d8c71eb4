// Puts the calling process on a loopback device shaped to a link rate, so that a one-process
// benchmark (pushpull_benchmark --link) measures what a slower-than-memory link costs: the
// process moves into a private network namespace (unshare) whose own `lo` gets a token-bucket
// qdisc (tc tbf). Nothing outside that namespace is touched, and it disappears with the process.
// Both directions share the one shaped queue: a half-duplex link of that rate, exact for
// one-way transfers (pushes; their acknowledgements are bytes), pessimistic for push+pull.
// Needs root, ip and tc (iproute2).
#ifndef R2SP_TOOLS_BENCH_SHAPED_LOOPBACK_H_
#define R2SP_TOOLS_BENCH_SHAPED_LOOPBACK_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace r2sp::bench {

// "419mbit" -> 419e6: a positive number followed by tc's kbit, mbit or gbit (what netcluster
// takes). Anything else is an InvalidArgument naming the text.
absl::StatusOr<uint64_t> ParseLinkRate(absl::string_view text);

// The token bucket's size for a rate: 4 ms of traffic, and at least 128 KiB so that one of
// loopback's 64 KiB segments always fits (tbf drops a packet larger than its bucket).
uint64_t LinkBurstBytes(uint64_t bits_per_second);

// Moves this process (call it before any thread or socket exists) into a new network
// namespace and shapes its loopback to `bits_per_second` (from ParseLinkRate). An error says
// which step failed.
absl::Status EnterShapedLoopback(uint64_t bits_per_second);

}  // namespace r2sp::bench

#endif  // R2SP_TOOLS_BENCH_SHAPED_LOOPBACK_H_
