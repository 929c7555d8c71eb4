// The transport's peer identity and bounds over real sockets on 127.0.0.1: CURVE with the
// job's keys (a NULL peer or a CURVE peer with another key never reaches the handler; the role
// a key proves reaches it), distinct routing ids per transport, and the cap on requests one
// peer may have outstanding.
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/auth/curve_keys.h"
#include "common/transport.h"
#include "gtest/gtest.h"
#include "zmq_addon.hpp"

namespace r2sp {
namespace {

// Records who sent each request; answers it unless its key is 1000 or more (parked).
class WhoHandler : public RequestHandler {
 public:
  void HandleRequest(Message request, Responder responder) override {
    absl::MutexLock lock(&mu_);
    roles_.push_back(responder.authenticated_role());
    ids_.push_back(responder.routing_id());
    if (request.header.key() >= 1000) {
      parked_.push_back(std::move(responder));
      return;
    }
    responder.ReplyStatus(absl::OkStatus());
  }
  std::vector<proto::Role> roles() {
    absl::MutexLock lock(&mu_);
    return roles_;
  }
  std::vector<std::string> ids() {
    absl::MutexLock lock(&mu_);
    return ids_;
  }

 private:
  absl::Mutex mu_;
  std::vector<proto::Role> roles_;
  std::vector<std::string> ids_;
  std::vector<Responder> parked_;
};

std::unique_ptr<Transport> Make(std::shared_ptr<const JobKeys> keys = nullptr,
                                int max_outstanding = 1024) {
  TransportOptions options;
  options.curve = std::move(keys);
  options.max_outstanding_per_peer = max_outstanding;
  auto t = Transport::Create(options);
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

Message Ping(uint64_t key = 1) {
  Message m;
  m.header.set_type(proto::PULL);
  m.header.set_key(key);
  return m;
}

class TransportAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto keys = GenerateJobKeys();
    ASSERT_TRUE(keys.ok()) << keys.status();
    for (auto& [role, k] : *keys) keys_[role] = std::make_shared<const JobKeys>(k);
  }
  std::shared_ptr<const JobKeys> keys_[4];
};

TEST_F(TransportAuthTest, CurvePeerWithTheJobsKeyGetsThroughWithItsRole) {
  WhoHandler who;
  auto server = Make(keys_[proto::SERVER]);
  auto worker = Make(keys_[proto::WORKER]);
  server->Start(&who);
  worker->Start(nullptr);
  worker->ExpectPeer(server->endpoint(), proto::SERVER);
  absl::StatusOr<Message> reply = worker->Call(server->endpoint(), Ping(), absl::Seconds(10));
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->header.code(), proto::OK);
  EXPECT_EQ(who.roles(), std::vector<proto::Role>{proto::WORKER});
  EXPECT_EQ(who.ids(), std::vector<std::string>{worker->RoutingId()});
}

TEST_F(TransportAuthTest, NullPeerNeverReachesTheHandler) {
  WhoHandler who;
  auto server = Make(keys_[proto::SERVER]);
  auto plain = Make();
  server->Start(&who);
  plain->Start(nullptr);
  absl::StatusOr<Message> reply = plain->Call(server->endpoint(), Ping(), absl::Seconds(1));
  EXPECT_TRUE(absl::IsDeadlineExceeded(reply.status())) << reply.status();
  EXPECT_TRUE(who.roles().empty());
  EXPECT_EQ(server->counters().requests_received, 0u);
}

TEST_F(TransportAuthTest, CurvePeerWithAnotherJobsKeyNeverReachesTheHandler) {
  WhoHandler who;
  auto server = Make(keys_[proto::SERVER]);
  auto other_job = GenerateJobKeys();
  ASSERT_TRUE(other_job.ok());
  // It knows this job's public keys (they are not secret), but holds another worker key.
  JobKeys impostor = (*other_job)[proto::WORKER];
  impostor.public_keys = keys_[proto::WORKER]->public_keys;
  auto intruder = Make(std::make_shared<const JobKeys>(impostor));
  server->Start(&who);
  intruder->Start(nullptr);
  intruder->ExpectPeer(server->endpoint(), proto::SERVER);
  absl::StatusOr<Message> reply = intruder->Call(server->endpoint(), Ping(), absl::Seconds(1));
  EXPECT_TRUE(absl::IsDeadlineExceeded(reply.status())) << reply.status();
  EXPECT_TRUE(who.roles().empty());
  EXPECT_GE(server->counters().refused_connections, 1u);
}

TEST_F(TransportAuthTest, NothingGoesToAPeerWhoseRoleIsNotKnown) {
  WhoHandler who;
  auto server = Make(keys_[proto::SERVER]);
  auto worker = Make(keys_[proto::WORKER]);
  server->Start(&who);
  worker->Start(nullptr);
  absl::StatusOr<Message> reply = worker->Call(server->endpoint(), Ping(), absl::Seconds(5));
  EXPECT_TRUE(absl::IsFailedPrecondition(reply.status())) << reply.status();
}

TEST_F(TransportAuthTest, EveryTransportHasItsOwnRoutingId) {
  WhoHandler who;
  auto server = Make();
  auto a = Make();
  auto b = Make();
  server->Start(&who);
  a->Start(nullptr);
  b->Start(nullptr);
  ASSERT_TRUE(a->Call(server->endpoint(), Ping(), absl::Seconds(10)).ok());
  ASSERT_TRUE(b->Call(server->endpoint(), Ping(), absl::Seconds(10)).ok());
  EXPECT_NE(a->RoutingId(), b->RoutingId());
  EXPECT_EQ(who.ids(), (std::vector<std::string>{a->RoutingId(), b->RoutingId()}));
  EXPECT_EQ(who.roles(), (std::vector<proto::Role>{proto::ROLE_UNSPECIFIED,
                                                    proto::ROLE_UNSPECIFIED}));
}

// A peer with `cap` requests outstanding gets NOT_READY for more, from the transport; another
// peer is still served.
TEST_F(TransportAuthTest, OutstandingRequestsPerPeerAreCapped) {
  WhoHandler who;
  const int cap = 8;
  auto server = Make(nullptr, cap);
  auto flooder = Make();
  auto other = Make();
  server->Start(&who);
  flooder->Start(nullptr);
  other->Start(nullptr);
  absl::Mutex mu;
  std::vector<proto::ErrorCode> codes;
  for (int i = 0; i < cap + 5; ++i) {
    flooder->Request(server->endpoint(), Ping(1000 + i), absl::Seconds(3),
                     [&](absl::StatusOr<Message> reply) {
                       absl::MutexLock lock(&mu);
                       codes.push_back(reply.ok() ? reply->header.code() : proto::INTERNAL);
                     });
  }
  {
    absl::MutexLock lock(&mu);
    mu.AwaitWithTimeout(absl::Condition(
                            +[](std::vector<proto::ErrorCode>* c) { return c->size() >= 5; },
                            &codes),
                        absl::Seconds(10));
    ASSERT_EQ(codes.size(), 5u);
    for (proto::ErrorCode c : codes) EXPECT_EQ(c, proto::NOT_READY);
  }
  EXPECT_EQ(who.ids().size(), static_cast<size_t>(cap));
  EXPECT_EQ(server->counters().refused_requests, 5u);
  absl::StatusOr<Message> reply = other->Call(server->endpoint(), Ping(), absl::Seconds(10));
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->header.code(), proto::OK);
  flooder->Stop();  // the parked requests' callbacks end before `codes` goes
}

}  // namespace
}  // namespace r2sp
