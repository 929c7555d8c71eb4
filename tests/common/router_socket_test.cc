// BindRouter and WithHost: the endpoint a transport advertises, bind failures, and a peer
// reconnecting under its routing id.
#include "common/router_socket.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace r2sp {
namespace {

TEST(WithHostTest, ReplacesTheHostOfATcpEndpointOnly) {
  EXPECT_EQ(WithHost("tcp://0.0.0.0:4000", "10.0.0.7"), "tcp://10.0.0.7:4000");
  EXPECT_EQ(WithHost("tcp://[::1]:4000", "h"), "tcp://h:4000");
  EXPECT_EQ(WithHost("inproc://name", "h"), "inproc://name");
  EXPECT_EQ(WithHost("garbage", "h"), "garbage");
}

RouterSocketOptions Options(std::string bind, std::string advertise = "") {
  RouterSocketOptions options;
  options.bind_endpoint = std::move(bind);
  options.advertise_host = std::move(advertise);
  options.send_queue = 10;
  options.receive_queue = 10;
  options.max_frame_bytes = 1 << 20;
  return options;
}

TEST(BindRouterTest, AWildcardBindIsAdvertisedAsLoopbackUnlessAHostIsGiven) {
  zmq::context_t context(1);
  zmq::socket_t any(context, zmq::socket_type::router);
  absl::StatusOr<std::string> endpoint = BindRouter(any, Options("tcp://0.0.0.0:*"));
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  EXPECT_TRUE(absl::StartsWith(*endpoint, "tcp://127.0.0.1:")) << *endpoint;

  zmq::socket_t advertised(context, zmq::socket_type::router);
  endpoint = BindRouter(advertised, Options("tcp://127.0.0.1:*", "node7.example"));
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  EXPECT_TRUE(absl::StartsWith(*endpoint, "tcp://node7.example:")) << *endpoint;
  EXPECT_EQ(advertised.get(zmq::sockopt::sndhwm), 10);
  EXPECT_EQ(advertised.get(zmq::sockopt::maxmsgsize), 1 << 20);
}

TEST(BindRouterTest, ABadEndpointIsInvalidArgument) {
  zmq::context_t context(1);
  zmq::socket_t router(context, zmq::socket_type::router);
  absl::StatusOr<std::string> endpoint = BindRouter(router, Options("tcp://nonsense"));
  EXPECT_EQ(endpoint.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(endpoint.status().message(), "cannot bind tcp://nonsense: "))
      << endpoint.status();
}


// Receives one multipart message within `timeout_ms`; empty if none came.
std::vector<std::string> ReceiveWithin(zmq::socket_t& socket, int timeout_ms) {
  socket.set(zmq::sockopt::rcvtimeo, timeout_ms);
  std::vector<std::string> frames;
  zmq::message_t frame;
  do {
    if (!socket.recv(frame)) return {};
    frames.push_back(frame.to_string());
  } while (frame.more());
  return frames;
}

// A worker that resets its connection to a server, or whose old connection reached the process
// that replaced a lost server at the same endpoint, reconnects under the same routing id; the
// router may not have noticed the old connection's close yet (here it is never closed). The new
// connection must take the routing id over, both ways: without ROUTER_HANDOVER the router
// ignored it and the worker's requests went unanswered until they timed out (a stalled job
// after a server's replacement over ssh, under load).
TEST(BindRouterTest, APeerReconnectingUnderItsRoutingIdTakesItOver) {
  zmq::context_t context(1);
  zmq::socket_t router(context, zmq::socket_type::router);
  absl::StatusOr<std::string> endpoint = BindRouter(router, Options("tcp://127.0.0.1:*"));
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  auto dealer = [&] {
    zmq::socket_t d(context, zmq::socket_type::dealer);
    d.set(zmq::sockopt::routing_id, "worker-a");
    d.set(zmq::sockopt::linger, 0);
    d.connect(*endpoint);
    return d;
  };
  zmq::socket_t old_connection = dealer();
  old_connection.send(zmq::str_buffer("first"));
  EXPECT_EQ(ReceiveWithin(router, 5000), (std::vector<std::string>{"worker-a", "first"}));

  zmq::socket_t new_connection = dealer();  // the old one still open
  new_connection.send(zmq::str_buffer("second"));
  EXPECT_EQ(ReceiveWithin(router, 5000), (std::vector<std::string>{"worker-a", "second"}));
  router.send(zmq::str_buffer("worker-a"), zmq::send_flags::sndmore);
  router.send(zmq::str_buffer("reply"));
  EXPECT_EQ(ReceiveWithin(new_connection, 5000), std::vector<std::string>{"reply"});
  EXPECT_EQ(ReceiveWithin(old_connection, 200), std::vector<std::string>{});
}

}  // namespace
}  // namespace r2sp
