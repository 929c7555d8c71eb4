// The ZeroMQ transport over real sockets on 127.0.0.1: requests, replies, payloads,
// deadlines, garbage, and stopping with requests outstanding.
#include "common/transport.h"

#include <cstring>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "zmq_addon.hpp"

namespace r2sp {
namespace {

// Echoes a request's payload back; never answers keys >= 1000 (to test deadlines).
class EchoHandler : public RequestHandler {
 public:
  void HandleRequest(Message request, Responder responder) override {
    if (request.header.key() >= 1000) {
      parked_.push_back(std::move(responder));
      return;
    }
    Message reply;
    reply.header.set_key(request.header.key() + 1);
    for (zmq::message_t& p : request.payload) reply.payload.push_back(std::move(p));
    responder.Reply(std::move(reply));
  }
  std::vector<Responder> parked_;
};

std::unique_ptr<Transport> Make() {
  auto t = Transport::Create(TransportOptions());
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

TEST(TransportTest, RequestReplyWithPayload) {
  EchoHandler echo;
  auto server = Make();
  auto client = Make();
  server->Start(&echo);
  client->Start(nullptr);
  std::vector<float> data(1 << 20);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i);
  Message request;
  request.header.set_type(proto::PUSH);
  request.header.set_key(41);
  request.payload.push_back(BorrowedFrame(data.data(), data.size() * sizeof(float)));
  absl::StatusOr<Message> reply = client->Call(server->endpoint(), std::move(request),
                                               absl::Seconds(10));
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->header.is_reply());
  EXPECT_EQ(reply->header.type(), proto::PUSH);
  EXPECT_EQ(reply->header.key(), 42u);
  ASSERT_EQ(reply->payload.size(), 1u);
  ASSERT_EQ(reply->payload[0].size(), data.size() * sizeof(float));
  EXPECT_EQ(std::memcmp(reply->payload[0].data(), data.data(), reply->payload[0].size()), 0);
  EXPECT_EQ(server->counters().requests_received, 1u);
  EXPECT_EQ(client->counters().payload_bytes_received, data.size() * sizeof(float));
}

// Threads of synthetic workers share one ZeroMQ context (TransportOptions::context): two
// transports in it still talk as two peers, and the context outlives whichever stops first.
TEST(TransportTest, TransportsSharingAContextTalkToEachOther) {
  EchoHandler echo;
  TransportOptions options;
  options.context = std::make_shared<zmq::context_t>(1);
  auto server = Transport::Create(options);
  auto client = Transport::Create(options);
  ASSERT_TRUE(server.ok() && client.ok());
  options.context.reset();  // the transports hold it
  (*server)->Start(&echo);
  (*client)->Start(nullptr);
  Message request;
  request.header.set_type(proto::PULL);
  request.header.set_key(6);
  absl::StatusOr<Message> reply =
      (*client)->Call((*server)->endpoint(), std::move(request), absl::Seconds(10));
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->header.key(), 7u);
  server->reset();  // stops and closes its sockets; the client's context lives on
  EXPECT_EQ((*client)->counters().replies_received, 1u);
}

TEST(TransportTest, CurveKeysNeedAContextOfTheirOwn) {
  TransportOptions options;
  options.context = std::make_shared<zmq::context_t>(1);
  options.curve = std::make_shared<JobKeys>();
  EXPECT_EQ(Transport::Create(options).status(),
            absl::InvalidArgumentError("a transport with CURVE keys needs a ZeroMQ context of "
                                       "its own (for its ZAP handler)"));
}

TEST(TransportTest, ManyConcurrentRequestsAllComplete) {
  EchoHandler echo;
  auto server = Make();
  auto client = Make();
  server->Start(&echo);
  client->Start(nullptr);
  absl::Mutex mu;
  int done = 0, ok = 0;
  for (int i = 0; i < 500; ++i) {
    Message m;
    m.header.set_type(proto::PULL);
    m.header.set_key(i);
    client->Request(server->endpoint(), std::move(m), absl::Seconds(10),
                    [&, i](absl::StatusOr<Message> reply) {
                      absl::MutexLock lock(&mu);
                      ++done;
                      ok += reply.ok() && reply->header.key() == static_cast<uint64_t>(i + 1);
                    });
  }
  absl::MutexLock lock(&mu);
  mu.Await(absl::Condition(+[](int* d) { return *d == 500; }, &done));
  EXPECT_EQ(ok, 500);
}

TEST(TransportTest, UnansweredRequestTimesOut) {
  EchoHandler echo;
  auto server = Make();
  auto client = Make();
  server->Start(&echo);
  client->Start(nullptr);
  Message m;
  m.header.set_type(proto::PULL);
  m.header.set_key(1000);
  absl::StatusOr<Message> reply =
      client->Call(server->endpoint(), std::move(m), absl::Milliseconds(200));
  EXPECT_TRUE(absl::IsDeadlineExceeded(reply.status())) << reply.status();
  EXPECT_EQ(client->counters().timed_out_requests, 1u);
}

TEST(TransportTest, GarbageGetsAnErrorReplyAndServingContinues) {
  EchoHandler echo;
  auto server = Make();
  server->Start(&echo);
  zmq::context_t ctx;
  zmq::socket_t raw(ctx, zmq::socket_type::dealer);
  raw.set(zmq::sockopt::linger, 0);
  raw.set(zmq::sockopt::rcvtimeo, 5000);
  raw.connect(server->endpoint());
  raw.send(zmq::str_buffer("\xff\x01garbage"), zmq::send_flags::none);
  std::vector<zmq::message_t> frames;
  ASSERT_TRUE(zmq::recv_multipart(raw, std::back_inserter(frames)));
  absl::StatusOr<Message> error = DecodeFrames(frames, DecodeLimits());
  ASSERT_TRUE(error.ok());
  EXPECT_EQ(error->header.type(), proto::ERROR);
  EXPECT_EQ(error->header.code(), proto::BAD_MESSAGE);
  EXPECT_EQ(server->counters().dropped_messages, 1u);

  auto client = Make();
  client->Start(nullptr);
  Message m;
  m.header.set_type(proto::PULL);
  m.header.set_key(1);
  EXPECT_TRUE(client->Call(server->endpoint(), std::move(m), absl::Seconds(5)).ok());
}

TEST(TransportTest, BadEndpointFailsTheRequest) {
  auto client = Make();
  client->Start(nullptr);
  Message m;
  m.header.set_type(proto::PULL);
  absl::StatusOr<Message> reply = client->Call("not-an-endpoint", std::move(m), absl::Seconds(5));
  EXPECT_TRUE(absl::IsUnavailable(reply.status())) << reply.status();
}

TEST(TransportTest, StopCancelsOutstandingRequests) {
  auto client = Make();
  client->Start(nullptr);
  absl::Notification called;
  absl::Status seen;
  Message m;
  m.header.set_type(proto::PULL);
  client->Request("tcp://127.0.0.1:1", std::move(m), absl::Hours(1),
                  [&](absl::StatusOr<Message> reply) {
                    seen = reply.status();
                    called.Notify();
                  });
  client->Stop();
  ASSERT_TRUE(called.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_TRUE(absl::IsCancelled(seen)) << seen;
  // After Stop, new requests are cancelled at once rather than lost.
  Message late;
  late.header.set_type(proto::PULL);
  EXPECT_TRUE(absl::IsCancelled(
      client->Call("tcp://127.0.0.1:1", std::move(late), absl::Seconds(5)).status()));
}

TEST(TransportTest, BindFailureIsAnError) {
  TransportOptions options;
  options.bind_endpoint = "tcp://256.1.1.1:5";
  EXPECT_FALSE(Transport::Create(options).ok());
}

// A lost server's connection is reset (Requester::ResetPeer): what it owed fails at once with
// UNAVAILABLE, and what was queued for it never reaches a successor bound at the same endpoint.
TEST(TransportTest, ResetPeerFailsWhatALostPeerOwesAndDeliversNothingOfItToItsSuccessor) {
  EchoHandler first_handler;
  auto first = Make();
  auto client = Make();
  first->Start(&first_handler);
  client->Start(nullptr);
  const std::string endpoint = first->endpoint();
  absl::Notification owed_failed;
  absl::Status owed_status;
  Message parked;
  parked.header.set_type(proto::PULL);
  parked.header.set_key(1000);  // never answered
  client->Request(endpoint, std::move(parked), absl::Seconds(60),
                  [&](absl::StatusOr<Message> reply) {
                    owed_status = reply.status();
                    owed_failed.Notify();
                  });
  absl::SleepFor(absl::Milliseconds(200));  // delivered and parked
  first.reset();  // the peer is gone
  absl::Notification queued_failed;
  Message queued;  // sent while nobody listens: queued on the connection
  queued.header.set_type(proto::PUSH);
  queued.header.set_key(5);
  client->Request(endpoint, std::move(queued), absl::Seconds(60),
                  [&](absl::StatusOr<Message> reply) {
                    EXPECT_TRUE(absl::IsUnavailable(reply.status())) << reply.status();
                    queued_failed.Notify();
                  });
  absl::SleepFor(absl::Milliseconds(100));
  client->ResetPeer(endpoint, "lost in a test");
  ASSERT_TRUE(owed_failed.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_TRUE(absl::IsUnavailable(owed_status)) << owed_status;
  EXPECT_NE(owed_status.message().find("lost in a test"), std::string::npos);
  ASSERT_TRUE(queued_failed.WaitForNotificationWithTimeout(absl::Seconds(5)));

  TransportOptions options;
  options.bind_endpoint = endpoint;
  auto successor = Transport::Create(options);
  ASSERT_TRUE(successor.ok()) << successor.status();
  EchoHandler successor_handler;
  (*successor)->Start(&successor_handler);
  Message fresh;
  fresh.header.set_type(proto::PUSH);
  fresh.header.set_key(7);
  absl::StatusOr<Message> reply = client->Call(endpoint, std::move(fresh), absl::Seconds(10));
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->header.key(), 8u);
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ((*successor)->counters().requests_received, 1u);  // not the queued one
}

}  // namespace
}  // namespace r2sp
