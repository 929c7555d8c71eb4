// PeerConnections without a running transport: which connection a request takes as they open
// in turn, the sockets' routing ids and thread pinning, closing a peer, and CURVE's need to
// know a peer's role. Connecting needs no listener, so nothing here waits on the network.
#include "common/peer_connections.h"

#include "common/auth/curve_keys.h"
#include "gtest/gtest.h"

namespace r2sp {
namespace {

constexpr char kPeer[] = "tcp://127.0.0.1:1";
constexpr char kOther[] = "tcp://127.0.0.1:2";

proto::Header Keyed(proto::MsgType type, uint64_t key) {
  proto::Header header;
  header.set_type(type);
  header.set_key(key);
  return header;
}

PeerConnectionsOptions Options(int connections) {
  PeerConnectionsOptions options;
  options.routing_id = "abc";
  options.connections_per_peer = connections;
  options.zmq_io_threads = 2;
  return options;
}

TEST(PeerConnectionsTest, PushesAndPullsSpreadOverConnectionsAsTheyOpenInTurn) {
  zmq::context_t context(2);
  PeerConnections peers(context, Options(3));
  EXPECT_EQ(peers.open_connections(kPeer), 1);
  EXPECT_EQ(peers.ConnectionFor(kPeer, Keyed(proto::PUSH, 2)), 0);  // only the first is open
  peers.Answered(kPeer, 1);  // not the newest open one: nothing opens
  EXPECT_EQ(peers.open_connections(kPeer), 1);
  peers.Answered(kPeer, 0);
  EXPECT_EQ(peers.open_connections(kPeer), 2);
  EXPECT_EQ(peers.ConnectionFor(kPeer, Keyed(proto::PUSH, 2)), 1);  // 2 mod 3, capped at 1
  EXPECT_EQ(peers.ConnectionFor(kPeer, Keyed(proto::PULL, 4)), 1);
  EXPECT_EQ(peers.ConnectionFor(kPeer, Keyed(proto::PULL, 3)), 0);
  peers.Answered(kPeer, 1);
  peers.Answered(kPeer, 2);
  EXPECT_EQ(peers.open_connections(kPeer), 3);  // never more than connections_per_peer
  EXPECT_EQ(peers.ConnectionFor(kPeer, Keyed(proto::PULL, 5)), 2);
  EXPECT_EQ(peers.ConnectionFor(kPeer, Keyed(proto::BARRIER, 5)), 0);  // unkeyed: the first
  EXPECT_EQ(peers.open_connections(kOther), 1);                        // each peer on its own
}

TEST(PeerConnectionsTest, OneConnectionPerPeerNeverOpensMore) {
  zmq::context_t context(1);
  PeerConnections peers(context, Options(1));
  peers.Answered(kPeer, 0);
  EXPECT_EQ(peers.open_connections(kPeer), 1);
  EXPECT_EQ(peers.ConnectionFor(kPeer, Keyed(proto::PUSH, 7)), 0);
}

TEST(PeerConnectionsTest, DealersCarryTheirConnectionsRoutingIdAndAreMadeOnce) {
  zmq::context_t context(2);
  PeerConnections peers(context, Options(3));
  absl::StatusOr<zmq::socket_t*> first = peers.DealerFor(kPeer, 0);
  absl::StatusOr<zmq::socket_t*> second = peers.DealerFor(kPeer, 2);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*first)->get(zmq::sockopt::routing_id), "abc");
  EXPECT_EQ((*second)->get(zmq::sockopt::routing_id), "abc.2");
  EXPECT_EQ((*second)->get(zmq::sockopt::affinity), uint64_t{1});  // 2 mod 2 I/O threads
  EXPECT_EQ(*peers.DealerFor(kPeer, 0), *first);
  ASSERT_TRUE(peers.DealerFor(kOther, 0).ok());
  EXPECT_EQ(peers.sockets().size(), 3u);

  peers.Answered(kPeer, 0);
  EXPECT_EQ(peers.Close(kPeer), 2);
  EXPECT_EQ(peers.sockets().size(), 1u);
  EXPECT_EQ(peers.open_connections(kPeer), 1);  // the rollout starts over
  EXPECT_EQ(peers.Close(kPeer), 0);
  EXPECT_EQ(peers.Close(kOther), 1);
  EXPECT_TRUE(peers.sockets().empty());
}

TEST(PeerConnectionsTest, ABadEndpointIsUnavailable) {
  zmq::context_t context(1);
  PeerConnections peers(context, Options(1));
  absl::StatusOr<zmq::socket_t*> dealer = peers.DealerFor("nonsense", 0);
  EXPECT_EQ(dealer.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(dealer.status().message().substr(0, 28), "cannot connect to nonsense: ");
  EXPECT_TRUE(peers.sockets().empty());
}

TEST(PeerConnectionsTest, WithCurveAPeerWhoseRoleIsNotKnownGetsNoConnection) {
  absl::StatusOr<absl::flat_hash_map<int, JobKeys>> keys = GenerateJobKeys();
  ASSERT_TRUE(keys.ok()) << keys.status();
  PeerConnectionsOptions options = Options(1);
  options.curve = std::make_shared<const JobKeys>((*keys)[proto::WORKER]);
  zmq::context_t context(1);
  PeerConnections peers(context, options);
  absl::StatusOr<zmq::socket_t*> dealer = peers.DealerFor(kPeer, 0);
  EXPECT_EQ(dealer.status(),
            absl::FailedPreconditionError(
                "no CURVE key to authenticate tcp://127.0.0.1:1 by: its role is not known "
                "(ExpectPeer)"));
  peers.ExpectPeer(kPeer, proto::SERVER);
  dealer = peers.DealerFor(kPeer, 0);
  ASSERT_TRUE(dealer.ok()) << dealer.status();
  EXPECT_EQ((*dealer)->get(zmq::sockopt::curve_serverkey),  // libzmq reads it back as Z85
            (*keys)[proto::SERVER].public_key);
}

}  // namespace
}  // namespace r2sp
