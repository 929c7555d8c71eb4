// RequestTracker with a fake clock and no sockets: each request ends exactly once (answered,
// timed out, failed or cancelled), late replies are dropped and counted, deadlines fire at the
// right time, cancelling a peer fails exactly its requests, and long unanswered ones are
// reported once per peer.
#include "common/request_tracker.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace r2sp {
namespace {

// What each request's callback received, in order.
struct Outcomes {
  ReplyCallback For(std::string name) {
    return [this, name](absl::StatusOr<Message> reply) {
      names.push_back(name);
      statuses.push_back(reply.status());
    };
  }
  std::vector<std::string> names;
  std::vector<absl::Status> statuses;
};

const absl::Time kStart = absl::FromUnixSeconds(1000);

TEST(RequestTrackerTest, IdsCountUpFromOne) {
  RequestTracker tracker;
  Outcomes out;
  EXPECT_EQ(tracker.Add("tcp://a:1", 0, kStart, out.For("a")), 1u);
  EXPECT_EQ(tracker.Add("tcp://a:1", 2, kStart, out.For("b")), 2u);
  EXPECT_EQ(tracker.size(), 2u);
}

TEST(RequestTrackerTest, AReplyCompletesItsRequestOnceAndALaterOneIsLate) {
  RequestTracker tracker;
  Outcomes out;
  const uint64_t id = tracker.Add("tcp://a:1", 3, kStart + absl::Seconds(5), out.For("a"));
  std::optional<OutstandingRequest> taken = tracker.TakeAnswered(id);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->peer, "tcp://a:1");
  EXPECT_EQ(taken->connection, 3);
  EXPECT_EQ(taken->deadline, kStart + absl::Seconds(5));
  taken->callback(Message{});
  EXPECT_EQ(tracker.size(), 0u);

  EXPECT_FALSE(tracker.TakeAnswered(id).has_value());
  EXPECT_FALSE(tracker.Fail(id, absl::InternalError("x")));
  EXPECT_EQ(tracker.ExpireDue(kStart + absl::Hours(1)), 0u);
  ASSERT_EQ(out.names, std::vector<std::string>{"a"});
  EXPECT_TRUE(out.statuses[0].ok());
  const RequestTrackerCounts counts = tracker.counts();
  EXPECT_EQ(counts.answered, 1u);
  EXPECT_EQ(counts.late_replies, 1u);
  EXPECT_EQ(counts.unknown_replies, 0u);
  EXPECT_EQ(counts.timed_out, 0u);
  EXPECT_EQ(counts.failed, 0u);
}

TEST(RequestTrackerTest, TimeoutsFireAtTheirDeadlineAndNotBefore) {
  RequestTracker tracker;
  Outcomes out;
  tracker.Add("tcp://a:1", 0, kStart + absl::Milliseconds(100), out.For("100ms"));
  tracker.Add("tcp://a:1", 0, kStart + absl::Milliseconds(250), out.For("250ms"));
  tracker.Add("tcp://b:1", 0, absl::InfiniteFuture(), out.For("never"));

  EXPECT_EQ(tracker.ExpireDue(kStart + absl::Milliseconds(99)), 0u);
  EXPECT_TRUE(out.names.empty());
  EXPECT_EQ(tracker.ExpireDue(kStart + absl::Milliseconds(100)), 1u);  // at the deadline
  EXPECT_EQ(out.names, std::vector<std::string>{"100ms"});
  EXPECT_EQ(tracker.ExpireDue(kStart + absl::Milliseconds(249)), 0u);
  EXPECT_EQ(tracker.ExpireDue(kStart + absl::Milliseconds(300)), 1u);
  EXPECT_EQ(out.names, (std::vector<std::string>{"100ms", "250ms"}));
  for (const absl::Status& status : out.statuses) {
    EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_EQ(status.message(), "no reply before the deadline");
  }
  EXPECT_EQ(tracker.size(), 1u);
  EXPECT_EQ(tracker.counts().timed_out, 2u);
}

TEST(RequestTrackerTest, AReplyAfterTheTimeoutIsDroppedAndCounted) {
  RequestTracker tracker;
  Outcomes out;
  const uint64_t id = tracker.Add("tcp://a:1", 0, kStart + absl::Seconds(1), out.For("a"));
  EXPECT_EQ(tracker.ExpireDue(kStart + absl::Seconds(2)), 1u);
  EXPECT_FALSE(tracker.TakeAnswered(id).has_value());
  EXPECT_FALSE(tracker.TakeAnswered(77).has_value());  // never issued
  EXPECT_FALSE(tracker.TakeAnswered(0).has_value());   // no request has id 0
  ASSERT_EQ(out.statuses.size(), 1u);                  // the callback ran once, at the timeout
  EXPECT_EQ(out.statuses[0].code(), absl::StatusCode::kDeadlineExceeded);
  const RequestTrackerCounts counts = tracker.counts();
  EXPECT_EQ(counts.late_replies, 1u);
  EXPECT_EQ(counts.unknown_replies, 2u);
  EXPECT_EQ(counts.answered, 0u);
}

TEST(RequestTrackerTest, CancellingAPeerFailsExactlyItsRequests) {
  RequestTracker tracker;
  Outcomes out;
  const absl::Time later = kStart + absl::Seconds(10);
  tracker.Add("tcp://lost:1", 0, later, out.For("lost-0"));
  const uint64_t kept = tracker.Add("tcp://kept:1", 0, later, out.For("kept"));
  tracker.Add("tcp://lost:1", 1, later, out.For("lost-1"));
  // A peer whose endpoint another's starts with is not the same peer.
  tracker.Add("tcp://lost:10", 0, later, out.For("lost10"));

  const absl::Status why = absl::UnavailableError("tcp://lost:1 was lost: heartbeats stopped");
  EXPECT_EQ(tracker.CancelPeer("tcp://lost:1", why), 2u);
  std::vector<std::string> names = out.names;
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"lost-0", "lost-1"}));
  for (const absl::Status& status : out.statuses) EXPECT_EQ(status, why);
  EXPECT_EQ(tracker.size(), 2u);
  EXPECT_EQ(tracker.CancelPeer("tcp://lost:1", why), 0u);
  EXPECT_TRUE(tracker.TakeAnswered(kept).has_value());
  EXPECT_EQ(tracker.counts().failed, 2u);
}

TEST(RequestTrackerTest, FailAndCancelAllEndRequestsWithTheStatusGiven) {
  RequestTracker tracker;
  Outcomes out;
  const uint64_t first = tracker.Add("tcp://a:1", 0, kStart, out.For("first"));
  tracker.Add("tcp://b:1", 0, kStart, out.For("second"));
  EXPECT_TRUE(tracker.Fail(first, absl::UnavailableError("cannot send to tcp://a:1: boom")));
  EXPECT_EQ(tracker.CancelAll(absl::CancelledError("transport stopped")), 1u);
  ASSERT_EQ(out.names, (std::vector<std::string>{"first", "second"}));
  EXPECT_EQ(out.statuses[0], absl::UnavailableError("cannot send to tcp://a:1: boom"));
  EXPECT_EQ(out.statuses[1], absl::CancelledError("transport stopped"));
  EXPECT_EQ(tracker.size(), 0u);
  EXPECT_EQ(tracker.counts().failed, 2u);
}

TEST(RequestTrackerTest, ACallbackMayAddARequestAndSeesItselfCounted) {
  RequestTracker tracker;
  uint64_t retried = 0;
  uint64_t timed_out_seen = 0;
  tracker.Add("tcp://a:1", 0, kStart, [&](absl::StatusOr<Message>) {
    timed_out_seen = tracker.counts().timed_out;
    retried =
        tracker.Add("tcp://a:1", 0, kStart + absl::Seconds(1), [](absl::StatusOr<Message>) {});
  });
  EXPECT_EQ(tracker.ExpireDue(kStart), 1u);
  EXPECT_EQ(timed_out_seen, 1u);
  EXPECT_EQ(retried, 2u);
  EXPECT_EQ(tracker.size(), 1u);
  EXPECT_EQ(tracker.ExpireDue(kStart + absl::Seconds(1)), 1u);
}


// A request unanswered for longer than the report's threshold is reported once, grouped by
// peer with the oldest named; answered ones, younger ones and ones without a send time are not.
TEST(RequestTrackerTest, LongUnansweredRequestsAreReportedOncePerPeerNamingTheOldest) {
  RequestTracker tracker;
  Outcomes out;
  const absl::Duration after = absl::Seconds(30);
  tracker.Add("tcp://s1:9100", 0, kStart + absl::Seconds(120), out.For("push3"),
              RequestLabel{kStart, proto::PUSH, 3});
  tracker.Add("tcp://s1:9100", 1, kStart + absl::Seconds(121), out.For("pull4"),
              RequestLabel{kStart + absl::Seconds(1), proto::PULL, 4});
  const uint64_t answered = tracker.Add("tcp://s0:9100", 0, kStart + absl::Seconds(120),
                                        out.For("pull0"), RequestLabel{kStart, proto::PULL, 0});
  tracker.Add("tcp://sched:9000", 0, absl::InfiniteFuture(), out.For("slot"),
              RequestLabel{kStart + absl::Seconds(20), proto::SLOT, 0});
  tracker.Add("tcp://s2:9100", 0, kStart + absl::Seconds(120), out.For("unlabelled"));
  EXPECT_EQ(tracker.ReportUnanswered(kStart + absl::Seconds(30), after),
            std::vector<std::string>{});  // none older than 30 s yet
  ASSERT_TRUE(tracker.TakeAnswered(answered).has_value());
  const std::vector<std::string> expected = {
      "2 requests to tcp://s1:9100 unanswered for over 30s; the oldest: request 1 (PUSH key 3) "
      "sent 31.5s ago on connection 0, failing at its deadline in 1m28.5s"};
  EXPECT_EQ(tracker.ReportUnanswered(kStart + absl::Milliseconds(31500), after), expected);
  EXPECT_EQ(tracker.ReportUnanswered(kStart + absl::Seconds(40), after),
            std::vector<std::string>{});  // each reported once
  EXPECT_EQ(tracker.ReportUnanswered(kStart + absl::Seconds(51), after),
            (std::vector<std::string>{
                "1 request to tcp://sched:9000 unanswered for over 30s; the oldest: request 4 "
                "(SLOT key 0) sent 31s ago on connection 0, failing at its deadline in inf"}));
  EXPECT_EQ(tracker.ReportUnanswered(kStart + absl::Seconds(52), absl::ZeroDuration()),
            std::vector<std::string>{});  // zero: never
  EXPECT_TRUE(out.names.empty());  // reports fail nothing
  EXPECT_EQ(tracker.size(), 4u);
}

}  // namespace
}  // namespace r2sp
