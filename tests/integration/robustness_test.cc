// Bad input against live processes: a real scheduler and server, with this test as the job's
// only worker. Garbage, truncated, oversized and unknown messages (and raw non-ZeroMQ bytes)
// must each get an error reply where one is possible, and the next valid requests must still
// be answered correctly.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/model_layout.h"
#include "common/scheduler_client.h"
#include "common/transport.h"
#include "gtest/gtest.h"
#include "tests/testing/child_process.h"
#include "worker/ps_client.h"
#include "zmq_addon.hpp"

namespace r2sp {
namespace {

using testing::ChildProcess;

// Sends raw frames from a fresh DEALER and returns the decoded answer (or an error).
absl::StatusOr<Message> SendRaw(const std::string& endpoint, std::vector<std::string> frames) {
  zmq::context_t ctx;
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.set(zmq::sockopt::rcvtimeo, 5000);
  dealer.connect(endpoint);
  for (size_t i = 0; i < frames.size(); ++i) {
    dealer.send(zmq::buffer(frames[i]),
                i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
  std::vector<zmq::message_t> reply;
  if (!zmq::recv_multipart(dealer, std::back_inserter(reply))) {
    return absl::DeadlineExceededError("no reply");
  }
  return DecodeFrames(reply, DecodeLimits());
}

std::string HeaderBytes(proto::Header header) { return header.SerializeAsString(); }

// Raw bytes over plain TCP, not ZeroMQ's handshake.
void SendTcpGarbage(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string junk(4096, '\x7f');
    (void)!write(fd, junk.data(), junk.size());
  }
  close(fd);
}

// The malformed messages both processes must survive; each must be answered with an error.
// `stranger_code` and `stranger_error`: the answer to a well-formed BARRIER from a worker rank
// the job does not have, which depends on who gets it and when.
void Attack(const std::string& endpoint, int port, proto::ErrorCode stranger_code,
            const std::string& stranger_error) {
  SCOPED_TRACE(endpoint);
  // Plain garbage.
  absl::StatusOr<Message> r = SendRaw(endpoint, {"\xde\xad\xbe\xef not a protobuf"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->header.code(), proto::BAD_MESSAGE);
  // Truncated: the header announces a 400-byte payload frame that is 10 bytes long.
  proto::Header push;
  push.set_type(proto::PUSH);
  push.set_sender_role(proto::WORKER);
  push.set_request_id(77);
  push.add_payload_bytes(400);
  r = SendRaw(endpoint, {HeaderBytes(push), std::string(10, 'x')});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->header.code(), proto::BAD_MESSAGE);
  EXPECT_NE(r->header.error().find("header says 400"), std::string::npos) << r->header.error();
  // Announced frame missing altogether.
  r = SendRaw(endpoint, {HeaderBytes(push)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->header.code(), proto::BAD_MESSAGE);
  // Oversized header: past DecodeLimits' max_header_bytes (1 MiB).
  proto::Header big;
  big.set_type(proto::HEARTBEAT);
  big.set_error(std::string(DecodeLimits().max_header_bytes + 1000, 'z'));
  r = SendRaw(endpoint, {HeaderBytes(big)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->header.code(), proto::BAD_MESSAGE);
  // Unknown message type.
  proto::Header unknown;
  unknown.set_type(static_cast<proto::MsgType>(1234));
  r = SendRaw(endpoint, {HeaderBytes(unknown)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->header.code(), proto::BAD_MESSAGE);
  // A well-formed request from a sender that does not exist.
  proto::Header stranger;
  stranger.set_type(proto::BARRIER);
  stranger.set_sender_role(proto::WORKER);
  stranger.set_sender_rank(99);
  stranger.set_request_id(5);
  r = SendRaw(endpoint, {HeaderBytes(stranger)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->header.code(), stranger_code) << r->header.error();
  EXPECT_EQ(r->header.error(), stranger_error);
  EXPECT_EQ(r->header.request_id(), 5u);
  SendTcpGarbage(port);
}

TEST(RobustnessTest, LiveProcessesSurviveBadInputAndKeepServing) {
  const std::string dir = testing::MakeTempDir("robust");
  const int scheduler_port = testing::FreePort();
  const int server_port = testing::FreePort();
  const std::string scheduler_ep = absl::StrCat("tcp://127.0.0.1:", scheduler_port);
  const std::string server_ep = absl::StrCat("tcp://127.0.0.1:", server_port);
  ChildProcess scheduler({"scheduler/scheduler", "--bind=" + scheduler_ep, "--num_servers=1",
                          "--num_workers=1", "--partition_bytes=64"},
                         dir + "/scheduler.log");
  ChildProcess server({"server/server", "--scheduler=" + scheduler_ep, "--bind=" + server_ep,
                       "--lr=1", "--momentum=0", "--heartbeat_ms=200"},
                      dir + "/server.log");

  // Before registration completes the scheduler must already cope.
  Attack(scheduler_ep, scheduler_port, proto::NOT_READY, "registration is still in progress");

  // Join as the job's worker, using the real client library.
  auto transport = Transport::Create(TransportOptions());
  ASSERT_TRUE(transport.ok());
  (*transport)->Start(nullptr);
  SchedulerClientOptions client_options;
  client_options.scheduler = scheduler_ep;
  client_options.endpoint = (*transport)->endpoint();
  client_options.heartbeat_period = absl::Milliseconds(200);
  SchedulerClient client(transport->get(), client_options);
  proto::TensorSpec tensor;
  tensor.set_name("w");
  tensor.set_num_elements(40);  // 160 bytes in 64-byte partitions: 14 + 13 + 13 floats
  auto reg = client.Register(proto::WORKER, {tensor});
  ASSERT_TRUE(reg.ok()) << reg.status() << scheduler.Log();
  client.StartHeartbeats(nullptr);
  ASSERT_TRUE(client.Barrier(proto::ALL).ok());

  Attack(scheduler_ep, scheduler_port, proto::INVALID_ARGUMENT, "unknown sender WORKER 99");
  Attack(server_ep, server_port, proto::INVALID_ARGUMENT, "a server does not handle BARRIER");

  // Valid requests still work, with correct results.
  auto layout = ModelLayout::Create({tensor}, 64, 1);
  ASSERT_TRUE(layout.ok());
  PsClient ps(transport->get(), &*layout, {server_ep}, PsClientOptions());
  std::vector<float> init(40, 1.0f), grad(40, 0.25f), params(40, 0.0f);
  ASSERT_TRUE(ps.Push(init.data(), 0, /*init=*/true).Wait().ok());
  // A push of the right size to partition 0 alone is applied (once: see the pull below).
  absl::Status alone = ps.PushPartition(0, grad.data(), 0).Wait();
  EXPECT_EQ(alone, absl::OkStatus());
  // A push of the wrong size for its key (12 bytes; key 1 holds 13 floats) is refused, and
  // changes nothing; so is a pull of a key no server holds.
  Message bad = Message();
  bad.header.set_type(proto::PUSH);
  bad.header.set_sender_role(proto::WORKER);
  bad.header.set_key(1);
  bad.payload.push_back(zmq::message_t(grad.data(), 12));
  auto refused = (*transport)->Call(server_ep, std::move(bad), absl::Seconds(10));
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->header.code(), proto::INVALID_ARGUMENT);
  EXPECT_EQ(refused->header.error(),
            "PUSH for key 1 (FP32): must carry one frame of 52 bytes, got 12 bytes in 1 frames");
  Message unknown_key;
  unknown_key.header.set_type(proto::PULL);
  unknown_key.header.set_sender_role(proto::WORKER);
  unknown_key.header.set_key(12345);
  refused = (*transport)->Call(server_ep, std::move(unknown_key), absl::Seconds(10));
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->header.code(), proto::INVALID_ARGUMENT);
  EXPECT_EQ(refused->header.error(), "key 12345 is not held by server 0");

  ASSERT_TRUE(ps.Push(grad.data(), 1).Wait().ok());
  ASSERT_TRUE(ps.Pull(params.data()).Wait().ok());
  for (size_t i = 0; i < 40; ++i) {
    // Partition 0 got two updates of 0.25, the others one.
    const float expected = i < layout->partitions()[0].num_elements ? 0.5f : 0.75f;
    ASSERT_EQ(params[i], expected) << i;
  }

  // The job still ends in order.
  proto::NodeCounters counters;
  counters.set_iterations(1);
  ASSERT_TRUE(client.Barrier(proto::WORKERS).ok());
  ASSERT_TRUE(client.Finish(counters).ok());
  client.StopHeartbeats();
  EXPECT_EQ(server.Wait(absl::Seconds(30)), 0) << server.Log();
  EXPECT_EQ(scheduler.Wait(absl::Seconds(30)), 0) << scheduler.Log();
  EXPECT_NE(server.Log().find("rejected"), std::string::npos);
}

}  // namespace
}  // namespace r2sp
