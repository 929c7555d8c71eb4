// Several connections to each peer (TransportOptions::connections_per_peer) over real sockets
// on 127.0.0.1: their routing ids, each opening once the one before has answered, pushes and
// pulls spread by key with everything else on the first, the receiver seeing one process
// whatever the connection (its identity and its bound on outstanding requests), replies back on
// the connection that asked, and a reset closing every connection to the peer.
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/transport.h"
#include "gtest/gtest.h"
#include "zmq_addon.hpp"

namespace r2sp {
namespace {

TEST(ConnectionRoutingIdTest, ConnectionsMapBackToTheirProcessAndNothingElseDoes) {
  const std::string process = "0123456789abcdef0123456789abcdef";
  for (int k = 0; k < kMaxConnectionsPerPeer; ++k) {
    const std::string id = ConnectionRoutingId(process, k);
    EXPECT_EQ(id == process, k == 0) << id;
    EXPECT_EQ(ProcessOfRoutingId(id), process) << id;
  }
  for (const std::string id : {"a.0", "a.05", "a.100", "a.x", "a.", ".5", "a.5b", "a"}) {
    EXPECT_EQ(ProcessOfRoutingId(id), id);
  }
  EXPECT_EQ(ProcessOfRoutingId("a.b.7"), "a.b");
}

TEST(ConnectionRoutingIdTest, ConnectionCountsOutOfRangeAreRefused) {
  for (int n : {0, -1, kMaxConnectionsPerPeer + 1}) {
    TransportOptions options;
    options.connections_per_peer = n;
    EXPECT_EQ(Transport::Create(options).status().code(), absl::StatusCode::kInvalidArgument) << n;
  }
  TransportOptions no_threads;
  no_threads.zmq_io_threads = 0;
  EXPECT_FALSE(Transport::Create(no_threads).ok());
}

std::unique_ptr<Transport> Client(int connections) {
  TransportOptions options;
  options.connections_per_peer = connections;
  options.zmq_io_threads = 2;
  auto t = Transport::Create(options);
  EXPECT_TRUE(t.ok()) << t.status();
  (*t)->Start(nullptr);
  return *std::move(t);
}

// Polls `done` for up to 5 s.
template <typename Done>
bool WaitUntil(Done done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

// Sends keys 0..n-1 one at a time, so that all n connections to `peer` are open.
void OpenConnections(Transport* client, const std::string& peer, int n) {
  for (int key = 0; key < n; ++key) {
    Message m;
    m.header.set_type(proto::PUSH);
    m.header.set_key(key);
    EXPECT_TRUE(client->Call(peer, std::move(m), absl::Seconds(10)).ok());
  }
}

Message Request(proto::MsgType type, uint64_t key) {
  Message m;
  m.header.set_type(type);
  m.header.set_key(key);
  return m;
}

// A bare ROUTER standing in for the peer: what arrives, and replies when told to.
class BareRouter {
 public:
  BareRouter() : socket_(context_, zmq::socket_type::router) {
    socket_.set(zmq::sockopt::rcvtimeo, 5000);
    socket_.bind("tcp://127.0.0.1:*");
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
  }
  const std::string& endpoint() const { return endpoint_; }

  // The next request: its routing id and header. Answers it if `reply`.
  std::pair<std::string, proto::Header> Receive(bool reply) {
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(socket_, std::back_inserter(frames)) || frames.size() < 2) {
      ADD_FAILURE() << "nothing arrived";
      return {};
    }
    const std::string routing_id = frames[0].to_string();
    frames.erase(frames.begin());
    absl::StatusOr<Message> m = DecodeFrames(frames, DecodeLimits());
    EXPECT_TRUE(m.ok()) << m.status();
    if (!m.ok()) return {};
    if (reply) {
      Message answer;
      answer.header = ReplyHeaderFor(m->header, absl::OkStatus());
      answer.header.set_is_reply(true);
      socket_.send(zmq::buffer(routing_id), zmq::send_flags::sndmore);
      socket_.send(EncodeHeader(answer), zmq::send_flags::none);
    }
    return {routing_id, m->header};
  }

 private:
  zmq::context_t context_;
  zmq::socket_t socket_;
  std::string endpoint_;
};

// Connections open one at a time, each once the one before has answered; then pushes and
// pulls go on connection key mod 3 and everything else on the first.
TEST(TransportConnectionsTest, ConnectionsOpenInTurnThenCarryTheirKeys) {
  BareRouter router;
  int answered = 0;
  absl::Mutex mu;  // before the client: its callbacks run until it is gone
  auto client = Client(3);
  const auto count = [&](absl::StatusOr<Message> reply) {
    EXPECT_TRUE(reply.ok()) << reply.status();
    absl::MutexLock lock(&mu);
    ++answered;
  };
  // Before any answer everything goes on the first connection.
  for (uint64_t key = 0; key < 3; ++key) {
    client->Request(router.endpoint(), Request(proto::PUSH, key), absl::Seconds(10), count);
  }
  for (int n = 0; n < 3; ++n) EXPECT_EQ(router.Receive(true).first, client->RoutingId());
  EXPECT_TRUE(WaitUntil([&] {
    absl::MutexLock lock(&mu);
    return answered == 3;
  }));
  // One request at a time from now on: key 1 opens the second connection (the first has
  // answered), key 2 the third, and then each key has its own.
  for (uint64_t key = 1; key < 9; ++key) {
    client->Request(router.endpoint(), Request(key % 2 ? proto::PULL : proto::PUSH, key),
                    absl::Seconds(10), count);
    const auto [routing_id, header] = router.Receive(true);
    EXPECT_EQ(header.key(), key);
    EXPECT_EQ(routing_id, ConnectionRoutingId(client->RoutingId(), key % 3)) << "key " << key;
    const int want = 3 + static_cast<int>(key);
    EXPECT_TRUE(WaitUntil([&] {
      absl::MutexLock lock(&mu);
      return answered >= want;
    }));
  }
  client->Request(router.endpoint(), Request(proto::HEARTBEAT, 5), absl::Seconds(10), count);
  EXPECT_EQ(router.Receive(true).first, client->RoutingId());
  EXPECT_TRUE(WaitUntil([&] {
    absl::MutexLock lock(&mu);
    return answered == 12;
  }));
}

// Records who the transport says sent each request, and parks keys >= 1000.
class WhoHandler : public RequestHandler {
 public:
  void HandleRequest(Message request, Responder responder) override {
    {
      absl::MutexLock lock(&mu_);
      senders_.insert(responder.routing_id());
    }
    if (request.header.key() >= 1000) {
      parked_.push_back(std::move(responder));
      return;
    }
    Message reply;
    reply.header.set_key(request.header.key() + 1);
    responder.Reply(std::move(reply));
  }
  std::set<std::string> senders() const {
    absl::MutexLock lock(&mu_);
    return senders_;
  }

 private:
  mutable absl::Mutex mu_;
  std::set<std::string> senders_ ABSL_GUARDED_BY(mu_);
  std::vector<Responder> parked_;  // the I/O thread's only
};

TEST(TransportConnectionsTest, TheReceiverSeesOneProcessAndRepliesComeBackOnEachConnection) {
  WhoHandler who;
  auto server = Transport::Create(TransportOptions());
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->Start(&who);
  auto client = Client(4);
  for (uint64_t key = 0; key < 8; ++key) {
    absl::StatusOr<Message> reply = client->Call((*server)->endpoint(),
                                                 Request(proto::PUSH, key), absl::Seconds(10));
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(reply->header.key(), key + 1);
  }
  EXPECT_EQ(who.senders(), std::set<std::string>{client->RoutingId()});
}

TEST(TransportConnectionsTest, OutstandingRequestsAreBoundedPerProcessNotPerConnection) {
  WhoHandler who;
  TransportOptions options;
  options.max_outstanding_per_peer = 4;
  auto server = Transport::Create(options);
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->Start(&who);
  absl::Mutex mu;  // before the client: its callbacks run until it is gone
  int refused = 0, answered = 0;
  auto client = Client(3);
  OpenConnections(client.get(), (*server)->endpoint(), 3);
  for (uint64_t key = 1000; key < 1006; ++key) {  // parked, over 3 connections
    client->Request((*server)->endpoint(), Request(proto::PULL, key), absl::Seconds(30),
                    [&](absl::StatusOr<Message> reply) {
                      absl::MutexLock lock(&mu);
                      ++answered;
                      refused += reply.ok() && reply->header.code() == proto::NOT_READY;
                    });
  }
  ASSERT_TRUE(WaitUntil([&] {
    absl::MutexLock lock(&mu);
    return answered >= 2;
  }));
  absl::SleepFor(absl::Milliseconds(200));  // nothing more is answered
  absl::MutexLock lock(&mu);
  EXPECT_EQ(answered, 2);
  EXPECT_EQ(refused, 2);
  EXPECT_EQ((*server)->counters().refused_requests, 2u);
}

TEST(TransportConnectionsTest, ResetPeerFailsWhatEveryConnectionOwes) {
  WhoHandler who;
  auto server = Transport::Create(TransportOptions());
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->Start(&who);
  absl::Mutex mu;  // before the client: its callbacks run until it is gone
  int unavailable = 0;
  auto client = Client(3);
  OpenConnections(client.get(), (*server)->endpoint(), 3);
  for (uint64_t key = 1000; key < 1003; ++key) {  // parked, one on each connection
    client->Request((*server)->endpoint(), Request(proto::PULL, key), absl::Seconds(60),
                    [&](absl::StatusOr<Message> reply) {
                      absl::MutexLock lock(&mu);
                      unavailable += absl::IsUnavailable(reply.status());
                    });
  }
  absl::SleepFor(absl::Milliseconds(200));  // delivered and parked
  client->ResetPeer((*server)->endpoint(), "lost in a test");
  EXPECT_TRUE(WaitUntil([&] {
    absl::MutexLock lock(&mu);
    return unavailable == 3;
  }));
}

}  // namespace
}  // namespace r2sp
