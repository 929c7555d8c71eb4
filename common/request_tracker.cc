// Request tracking; see request_tracker.h.
#include "common/request_tracker.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace r2sp {

uint64_t RequestTracker::Add(std::string peer, int connection, absl::Time deadline,
                             ReplyCallback callback, RequestLabel label) {
  CHECK(callback) << "a tracked request needs a callback";
  const uint64_t id = next_id_++;
  outstanding_.emplace(id, OutstandingRequest{std::move(peer), connection, deadline,
                                              std::move(callback), label});
  return id;
}

std::vector<std::string> RequestTracker::ReportUnanswered(absl::Time now, absl::Duration after) {
  if (outstanding_.empty() || after <= absl::ZeroDuration()) return {};
  struct PerPeer {
    int count = 0;
    uint64_t oldest_id = 0;
    const OutstandingRequest* oldest = nullptr;
  };
  std::map<std::string, PerPeer> peers;  // sorted: the lines come in a stable order
  for (auto& [id, request] : outstanding_) {
    const absl::Time sent = request.label.sent;
    if (request.reported || sent == absl::InfinitePast() || now - sent <= after) continue;
    request.reported = true;
    PerPeer& peer = peers[request.peer];
    ++peer.count;
    if (peer.oldest == nullptr || request.label.sent < peer.oldest->label.sent ||
        (request.label.sent == peer.oldest->label.sent && id < peer.oldest_id)) {
      peer.oldest = &request;
      peer.oldest_id = id;
    }
  }
  std::vector<std::string> lines;
  for (const auto& [endpoint, peer] : peers) {
    const OutstandingRequest& r = *peer.oldest;
    lines.push_back(absl::StrCat(
        peer.count, peer.count == 1 ? " request" : " requests", " to ", endpoint,
        " unanswered for over ", absl::FormatDuration(after), "; the oldest: request ",
        peer.oldest_id, " (", proto::MsgType_Name(r.label.type), " key ", r.label.key,
        ") sent ", absl::FormatDuration(absl::Trunc(now - r.label.sent, absl::Milliseconds(1))),
        " ago on connection ", r.connection, ", failing at its deadline in ",
        absl::FormatDuration(absl::Trunc(r.deadline - now, absl::Milliseconds(1)))));
    LOG(WARNING) << lines.back();
  }
  return lines;
}

std::optional<OutstandingRequest> RequestTracker::TakeAnswered(uint64_t id) {
  auto it = outstanding_.find(id);
  if (it == outstanding_.end()) {
    if (id != 0 && id < next_id_) {
      Bump(late_replies_);
    } else {
      Bump(unknown_replies_);
    }
    return std::nullopt;
  }
  OutstandingRequest request = std::move(it->second);
  outstanding_.erase(it);
  Bump(answered_);
  return request;
}

bool RequestTracker::Fail(uint64_t id, const absl::Status& status) {
  auto it = outstanding_.find(id);
  if (it == outstanding_.end()) return false;
  ReplyCallback callback = std::move(it->second.callback);
  outstanding_.erase(it);
  Bump(failed_);
  callback(status);
  return true;
}

template <typename Pred>
size_t RequestTracker::FailWhere(Pred pred, const absl::Status& status,
                                 std::atomic<uint64_t>* count) {
  std::vector<ReplyCallback> failed;
  for (auto it = outstanding_.begin(); it != outstanding_.end();) {
    if (pred(it->second)) {
      failed.push_back(std::move(it->second.callback));
      outstanding_.erase(it++);
    } else {
      ++it;
    }
  }
  Bump(*count, failed.size());
  for (ReplyCallback& callback : failed) callback(status);
  return failed.size();
}

size_t RequestTracker::ExpireDue(absl::Time now) {
  return FailWhere([now](const OutstandingRequest& r) { return r.deadline <= now; },
                   absl::DeadlineExceededError("no reply before the deadline"), &timed_out_);
}

size_t RequestTracker::CancelPeer(absl::string_view peer, const absl::Status& status) {
  return FailWhere([peer](const OutstandingRequest& r) { return r.peer == peer; }, status,
                   &failed_);
}

size_t RequestTracker::CancelAll(const absl::Status& status) {
  return FailWhere([](const OutstandingRequest&) { return true; }, status, &failed_);
}

RequestTrackerCounts RequestTracker::counts() const {
  RequestTrackerCounts counts;
  counts.answered = answered_.load(std::memory_order_relaxed);
  counts.timed_out = timed_out_.load(std::memory_order_relaxed);
  counts.failed = failed_.load(std::memory_order_relaxed);
  counts.late_replies = late_replies_.load(std::memory_order_relaxed);
  counts.unknown_replies = unknown_replies_.load(std::memory_order_relaxed);
  return counts;
}

}  // namespace r2sp
