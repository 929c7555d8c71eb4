// A lost server's replacement as a worker sees it: the PsClient sends requests a reset
// connection failed again, with backoff, to the server's current endpoint (pushes marked as
// retries, their bytes unchanged); the ServerFollower turns the scheduler's heartbeat news into
// connection resets and new endpoints.
#include "worker/server_follower.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "tests/testing/fakes.h"
#include "worker/ps_client.h"

namespace r2sp {
namespace {

// Answers the first `failures` requests UNAVAILABLE (as a reset connection does) and the rest
// OK, recording every request. Thread-safe: retries come from the PsClient's own thread.
class FlakyServers : public Requester {
 public:
  explicit FlakyServers(int failures) : failures_(failures) {}
  const std::string& RoutingId() const override { return id_; }
  void Request(const std::string& peer, Message request, absl::Duration /*timeout*/,
               ReplyCallback callback) override {
    bool fail;
    {
      absl::MutexLock lock(&mu_);
      fail = failures_-- > 0;
      peers.push_back(peer);
      std::string bytes;
      for (const zmq::message_t& f : request.payload) bytes.append(f.data<char>(), f.size());
      payloads.push_back(bytes);
      retry_flags.push_back(request.header.push().retry());
    }
    if (fail) {
      callback(absl::UnavailableError("lost"));
      return;
    }
    Message reply;
    reply.header.set_type(request.header.type());
    reply.header.set_is_reply(true);
    callback(std::move(reply));
  }
  absl::Mutex mu_;
  std::vector<std::string> peers ABSL_GUARDED_BY(mu_);
  std::vector<std::string> payloads ABSL_GUARDED_BY(mu_);
  std::vector<bool> retry_flags ABSL_GUARDED_BY(mu_);

 private:
  const std::string id_ = "worker";
  int failures_ ABSL_GUARDED_BY(mu_);
};

ModelLayout OnePartition() {
  proto::TensorSpec t;
  t.set_name("w");
  t.set_num_elements(4);
  return *ModelLayout::Create({t}, 16, 1);
}

TEST(PsClientRetryTest, UnavailablePushIsSentAgainToTheCurrentEndpointMarkedAsARetry) {
  FlakyServers servers(/*failures=*/2);
  const ModelLayout layout = OnePartition();
  PsClientOptions options;
  options.server_retry = absl::Seconds(30);
  PsClient ps(&servers, &layout, {"tcp://old:1"}, options);
  const std::vector<float> grads = {1, 2, 3, 4};
  const Ticket first = ps.Push(grads.data(), /*clock=*/7);
  ps.SetServerEndpoint(0, "tcp://new:2");  // the replacement, while the retries back off
  ASSERT_TRUE(first.Wait().ok());
  absl::MutexLock lock(&servers.mu_);
  ASSERT_EQ(servers.peers.size(), 3u);
  EXPECT_EQ(servers.peers[0], "tcp://old:1");
  EXPECT_EQ(servers.peers[2], "tcp://new:2");
  EXPECT_EQ(servers.retry_flags, (std::vector<bool>{false, true, true}));
  for (const std::string& p : servers.payloads) {
    ASSERT_EQ(p.size(), sizeof(float) * 4);
    EXPECT_EQ(std::memcmp(p.data(), grads.data(), p.size()), 0);
  }
  EXPECT_EQ(ps.counters().retries, 2u);
  EXPECT_EQ(ps.counters().pushes, 1u);
}

TEST(PsClientRetryTest, WithoutRetriesOrPastTheirTimeTheErrorIsReturned) {
  const ModelLayout layout = OnePartition();
  const std::vector<float> grads = {1, 2, 3, 4};
  {
    FlakyServers servers(1);
    PsClient ps(&servers, &layout, {"tcp://old:1"}, PsClientOptions());
    EXPECT_TRUE(absl::IsUnavailable(ps.Push(grads.data(), 0).Wait()));
  }
  FlakyServers servers(1000000);
  PsClientOptions options;
  options.server_retry = absl::Milliseconds(300);
  PsClient ps(&servers, &layout, {"tcp://old:1"}, options);
  std::vector<float> params(4);
  const absl::Time start = absl::Now();
  EXPECT_TRUE(absl::IsUnavailable(ps.Pull(params.data()).Wait()));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(ServerFollowerTest, LossResetsTheConnectionOnceAndAReplacementMovesTheEndpoint) {
  testing::RecordingRequester requester;
  proto::TensorSpec t;
  t.set_name("w");
  t.set_num_elements(8);
  const ModelLayout layout = *ModelLayout::Create({t}, 16, 2);
  PsClient ps(&requester, &layout, {"tcp://s0:1", "tcp://s1:1"}, PsClientOptions());
  proto::AddressBook book;
  for (const char* e : {"tcp://s0:1", "tcp://s1:1"}) book.add_servers()->set_endpoint(e);
  ServerFollower follower(&requester, &ps, book);

  proto::HeartbeatReply lost;
  lost.add_replacing_servers(1);
  follower.OnHeartbeat(lost);
  follower.OnHeartbeat(lost);  // every heartbeat says so; one reset
  EXPECT_EQ(requester.resets, (std::vector<std::string>{"tcp://s1:1"}));

  proto::HeartbeatReply replaced;
  for (int r = 0; r < 2; ++r) {
    proto::NodeInfo* s = replaced.add_servers();
    s->set_rank(r);
    s->set_endpoint(r == 1 ? "tcp://s1b:2" : "tcp://s0:1");
    s->set_incarnation(r == 1 ? 1 : 0);
  }
  follower.OnHeartbeat(replaced);
  follower.OnHeartbeat(replaced);
  EXPECT_EQ(ps.ServerEndpoint(1), "tcp://s1b:2");
  EXPECT_EQ(ps.ServerEndpoint(0), "tcp://s0:1");
  // The replacement is elsewhere: the old endpoint is reset again, as retries sent there while
  // the rank was lost would wait for a reply that never comes.
  EXPECT_EQ(requester.resets, (std::vector<std::string>{"tcp://s1:1", "tcp://s1:1"}));

  // A second loss of rank 1 goes unnoticed and its replacement is the first news: the old
  // connection is reset then, so what it owed is sent again.
  replaced.mutable_servers(1)->set_endpoint("tcp://s1c:3");
  replaced.mutable_servers(1)->set_incarnation(2);
  follower.OnHeartbeat(replaced);
  EXPECT_EQ(requester.resets,
            (std::vector<std::string>{"tcp://s1:1", "tcp://s1:1", "tcp://s1b:2"}));
  EXPECT_EQ(ps.ServerEndpoint(1), "tcp://s1c:3");
}

TEST(ServerFollowerTest, AReplacementAtTheLostEndpointKeepsTheRetriesQueuedThere) {
  testing::RecordingRequester requester;
  proto::TensorSpec t;
  t.set_name("w");
  t.set_num_elements(8);
  const ModelLayout layout = *ModelLayout::Create({t}, 16, 1);
  PsClient ps(&requester, &layout, {"tcp://s0:1"}, PsClientOptions());
  proto::AddressBook book;
  book.add_servers()->set_endpoint("tcp://s0:1");
  ServerFollower follower(&requester, &ps, book);
  proto::HeartbeatReply lost;
  lost.add_replacing_servers(0);
  follower.OnHeartbeat(lost);
  proto::HeartbeatReply replaced;
  proto::NodeInfo* s = replaced.add_servers();
  s->set_endpoint("tcp://s0:1");  // restarted on the same port, as tools/launch does
  s->set_incarnation(1);
  follower.OnHeartbeat(replaced);
  EXPECT_EQ(requester.resets, (std::vector<std::string>{"tcp://s0:1"}));
  EXPECT_EQ(ps.ServerEndpoint(0), "tcp://s0:1");
}

// Two servers lost together, their replacements on each other's old ports: rank 0's comes up
// at rank 1's old endpoint first. Rank 0's old endpoint is reset; rank 1's, now rank 0's, is
// not when rank 1 moves away (what was queued there for rank 1 is refused by server 0 as meant
// for another rank, and retried). Every request names the rank it is for.
TEST(ServerFollowerTest, ReplacementsOnEachOthersPortsResetNoLiveServersConnection) {
  testing::RecordingRequester requester;
  proto::TensorSpec t;
  t.set_name("w");
  t.set_num_elements(8);
  const ModelLayout layout = *ModelLayout::Create({t}, 16, 2);
  PsClient ps(&requester, &layout, {"tcp://h:1", "tcp://h:2"}, PsClientOptions());
  proto::AddressBook book;
  for (const char* e : {"tcp://h:1", "tcp://h:2"}) book.add_servers()->set_endpoint(e);
  ServerFollower follower(&requester, &ps, book);
  proto::HeartbeatReply lost;
  lost.add_replacing_servers(0);
  lost.add_replacing_servers(1);
  follower.OnHeartbeat(lost);
  EXPECT_EQ(requester.resets, (std::vector<std::string>{"tcp://h:1", "tcp://h:2"}));

  proto::HeartbeatReply first;
  proto::NodeInfo* s0 = first.add_servers();
  s0->set_rank(0);
  s0->set_endpoint("tcp://h:2");
  s0->set_incarnation(1);
  first.add_servers()->set_rank(1);  // still lost: its old entry
  first.mutable_servers(1)->set_endpoint("tcp://h:2");
  first.add_replacing_servers(1);
  follower.OnHeartbeat(first);
  EXPECT_EQ(ps.ServerEndpoint(0), "tcp://h:2");
  EXPECT_EQ(ps.ServerEndpoint(1), "tcp://h:2");
  EXPECT_EQ(requester.resets, (std::vector<std::string>{"tcp://h:1", "tcp://h:2", "tcp://h:1"}));

  proto::HeartbeatReply second = first;
  second.clear_replacing_servers();
  second.mutable_servers(1)->set_endpoint("tcp://h:1");
  second.mutable_servers(1)->set_incarnation(1);
  follower.OnHeartbeat(second);
  EXPECT_EQ(ps.ServerEndpoint(0), "tcp://h:2");
  EXPECT_EQ(ps.ServerEndpoint(1), "tcp://h:1");
  EXPECT_EQ(requester.resets, (std::vector<std::string>{"tcp://h:1", "tcp://h:2", "tcp://h:1"}));

  std::vector<float> params(8);
  ps.Pull(params.data());
  ASSERT_EQ(requester.sent.size(), 2u);
  EXPECT_NE(requester.sent[0].peer, requester.sent[1].peer);
  for (const auto& sent : requester.sent) {
    const int rank = layout.partitions().at(sent.request.header.key()).server;
    EXPECT_EQ(sent.peer, rank == 0 ? "tcp://h:2" : "tcp://h:1");
    ASSERT_TRUE(sent.request.header.has_to_server());
    EXPECT_EQ(sent.request.header.to_server(), rank);
  }
}

}  // namespace
}  // namespace r2sp
