// Tests of the shared peer checks: CheckPeerConnection's refusals in order, and
// RequestRefusals' count and replies.
#include "common/peer_checks.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/testing/fakes.h"

namespace r2sp {
namespace {

constexpr PeerCheckWording kWording{"not a worker's key", "unknown worker rank "};

Responder From(testing::RecordingSink& sink, const std::string& routing_id,
               proto::Role authenticated = proto::ROLE_UNSPECIFIED) {
  return Responder(&sink, routing_id, proto::Header(), authenticated);
}

TEST(RoleNameTest, NamesServersAndWorkersAndCallsTheRestNodes) {
  EXPECT_STREQ(RoleName(proto::SERVER), "server");
  EXPECT_STREQ(RoleName(proto::WORKER), "worker");
  EXPECT_STREQ(RoleName(proto::SCHEDULER), "node");
  EXPECT_STREQ(RoleName(proto::ROLE_UNSPECIFIED), "node");
}

TEST(CheckPeerConnectionTest, AcceptsTheRegisteredConnection) {
  testing::RecordingSink sink;
  const std::string registered = "w1";
  EXPECT_TRUE(CheckPeerConnection(From(sink, "w1"), proto::WORKER, 1, &registered, kWording).ok());
  EXPECT_TRUE(
      CheckPeerConnection(From(sink, "w1", proto::WORKER), proto::WORKER, 1, &registered, kWording)
          .ok());
}

TEST(CheckPeerConnectionTest, RefusesAKeyOfAnotherRoleFirst) {
  testing::RecordingSink sink;
  const std::string registered = "w1";
  const absl::Status status =
      CheckPeerConnection(From(sink, "x", proto::SERVER), proto::WORKER, 7, nullptr, kWording);
  EXPECT_EQ(status, absl::PermissionDeniedError("not a worker's key"));
  EXPECT_EQ(
      CheckPeerConnection(From(sink, "w1", proto::SERVER), proto::WORKER, 1, &registered, kWording),
      absl::PermissionDeniedError("not a worker's key"));
}

TEST(CheckPeerConnectionTest, RefusesAnUnknownRank) {
  testing::RecordingSink sink;
  EXPECT_EQ(CheckPeerConnection(From(sink, "w1"), proto::WORKER, 7, nullptr, kWording),
            absl::InvalidArgumentError("unknown worker rank 7"));
}

TEST(CheckPeerConnectionTest, RefusesAnotherConnectionNamingTheRoleAndRank) {
  testing::RecordingSink sink;
  const std::string registered = "s0";
  EXPECT_EQ(CheckPeerConnection(From(sink, "w1"), proto::SERVER, 0, &registered, kWording),
            absl::PermissionDeniedError("the request did not come over server 0's connection"));
  EXPECT_EQ(CheckPeerConnection(From(sink, "w1"), proto::SCHEDULER, 2, &registered, kWording),
            absl::PermissionDeniedError("the request did not come over node 2's connection"));
}

TEST(RequestRefusalsTest, CountsEveryRefusalAndAnswersEachWithItsStatus) {
  testing::RecordingSink sink;
  RequestRefusals refusals("denied", absl::Seconds(1));
  EXPECT_EQ(refusals.count(), 0u);
  const absl::Time t0 = absl::FromUnixSeconds(100);
  for (int i = 0; i < 3; ++i) {  // within one log period: logged once, counted three times
    Responder responder(&sink, "peer" + std::to_string(i), proto::Header());
    refusals.Refuse(responder, absl::PermissionDeniedError("no " + std::to_string(i)),
                    t0 + absl::Milliseconds(i));
  }
  EXPECT_EQ(refusals.count(), 3u);
  auto replies = sink.Take();
  ASSERT_EQ(replies.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(replies[i].first, "peer" + std::to_string(i));
    EXPECT_EQ(replies[i].second.header.code(), proto::PERMISSION_DENIED);
    EXPECT_EQ(replies[i].second.header.error(), "no " + std::to_string(i));
    EXPECT_TRUE(replies[i].second.header.is_reply());
  }
}

TEST(RequestRefusalsTest, KeepsTheStatusCode) {
  testing::RecordingSink sink;
  RequestRefusals refusals("rejected");
  Responder responder(&sink, "w0", proto::Header());
  refusals.Refuse(responder, absl::InvalidArgumentError("bad key"), absl::FromUnixSeconds(5));
  auto replies = sink.Take();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].second.header.code(), proto::INVALID_ARGUMENT);
  EXPECT_EQ(replies[0].second.header.error(), "bad key");
  EXPECT_EQ(refusals.count(), 1u);
}

}  // namespace
}  // namespace r2sp
