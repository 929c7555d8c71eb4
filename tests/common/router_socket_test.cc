// BindRouter and WithHost: the endpoint a transport advertises, and bind failures.
#include "common/router_socket.h"

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

}  // namespace
}  // namespace r2sp
