// Request tracking (as ps-lite's Customer): the requests a process has sent and not yet seen
// settled, by request id, each with the peer and connection it went on, its deadline, the
// callback its reply or failure goes to, and what it asked (to report those long unanswered).
// No sockets and no clock of its own: callers pass the time, so tests drive it with a fake
// clock. Transport (transport.h) owns one on its I/O thread.
#ifndef R2SP_COMMON_REQUEST_TRACKER_H_
#define R2SP_COMMON_REQUEST_TRACKER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/handler.h"

namespace r2sp {

// When a request was sent and what it asked for, for the report of those long unanswered.
struct RequestLabel {
  absl::Time sent = absl::InfinitePast();  // InfinitePast: never reported
  proto::MsgType type = proto::MSG_UNSPECIFIED;
  uint64_t key = 0;
};

// One request sent and not yet settled.
struct OutstandingRequest {
  std::string peer;    // the endpoint it went to
  int connection = 0;  // which of the connections to `peer` carried it
  absl::Time deadline;
  ReplyCallback callback;
  RequestLabel label;
  bool reported = false;  // by ReportUnanswered
};

// What happened to the requests tracked so far.
struct RequestTrackerCounts {
  uint64_t answered = 0;         // taken by TakeAnswered
  uint64_t timed_out = 0;        // failed by ExpireDue
  uint64_t failed = 0;           // failed by Fail, CancelPeer or CancelAll
  uint64_t late_replies = 0;     // replies to an id issued but no longer outstanding
  uint64_t unknown_replies = 0;  // replies to an id never issued
};

// Every request ends exactly once: answered, timed out, failed or cancelled; a reply that
// comes after that is dropped and counted as late.
//
// Thread-safety: one thread (the transport's I/O thread) owns it; only counts() may be called
// from any other. Callbacks run on the owning thread after their request has left the tracker
// and been counted, so a callback may Add a new request and sees the counts include its own.
class RequestTracker {
 public:
  RequestTracker() = default;
  RequestTracker(const RequestTracker&) = delete;
  RequestTracker& operator=(const RequestTracker&) = delete;

  // Starts tracking a request; returns its id: 1, 2, 3, ... (0 is never an id).
  // REQUIRES: `callback` is set.
  uint64_t Add(std::string peer, int connection, absl::Time deadline, ReplyCallback callback,
              RequestLabel label = {});

  // The reply to `id` arrived: takes the request out and returns it, and the caller runs its
  // callback with the reply (once its own bookkeeping is done). Nullopt, counted, when `id`
  // is not outstanding: late (timed out, failed or answered already) or never issued.
  std::optional<OutstandingRequest> TakeAnswered(uint64_t id);

  // Fails request `id` with `status` (e.g. it could not be sent). False if not outstanding.
  bool Fail(uint64_t id, const absl::Status& status);

  // Fails every request whose deadline is at or before `now` with DeadlineExceeded;
  // returns how many.
  size_t ExpireDue(absl::Time now);

  // The requests sent more than `after` before `now` and not reported yet, one line per peer
  // (how many, the oldest: what it asked, its age, when its deadline fails it), each logged as
  // a warning and each request reported once: a hang says in the log what it waits for, long
  // before the deadline. Zero `after`: none.
  std::vector<std::string> ReportUnanswered(absl::Time now, absl::Duration after);

  // Fails every request to `peer` with `status`, others untouched; returns how many.
  size_t CancelPeer(absl::string_view peer, const absl::Status& status);

  // Fails every request with `status`; returns how many.
  size_t CancelAll(const absl::Status& status);

  size_t size() const { return outstanding_.size(); }
  RequestTrackerCounts counts() const;

 private:
  // Takes out every request `pred` picks, adds their number to `*count`, then runs their
  // callbacks with `status`.
  template <typename Pred>
  size_t FailWhere(Pred pred, const absl::Status& status, std::atomic<uint64_t>* count);
  // Only the owning thread writes the counts; others may read them.
  static void Bump(std::atomic<uint64_t>& count, uint64_t by = 1) {
    count.store(count.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
  }

  absl::flat_hash_map<uint64_t, OutstandingRequest> outstanding_;
  uint64_t next_id_ = 1;
  std::atomic<uint64_t> answered_{0}, timed_out_{0}, failed_{0}, late_replies_{0},
      unknown_replies_{0};
};

}  // namespace r2sp

#endif  // R2SP_COMMON_REQUEST_TRACKER_H_
