// ServerNode's failures end Run() with a clear error instead of a hang or an exit, and a
// replacement server heartbeats while it restores its shard. (Its whole life in a job runs in
// tests/integration, through the server binary.)
#include "server/server_node.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/env.h"
#include "common/handler.h"
#include "common/transport.h"
#include "gtest/gtest.h"

namespace r2sp {
namespace {

TEST(ServerNodeTest, AnEndpointItCannotBindIsInvalidArgument) {
  ServerNodeOptions options;
  options.connection.bind = "tcp://no-such-interface-r2sp:*";
  ServerNode node(options);
  const absl::Status status = node.Run();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("cannot bind"), absl::string_view::npos) << status;
  EXPECT_EQ(node.counters().pushes(), 0u);
}

TEST(ServerNodeTest, ASilentSchedulerEndsRunAfterTheRegisterTimeout) {
  ServerNodeOptions options;
  options.connection.scheduler = "tcp://127.0.0.1:1";  // nothing listens there
  options.connection.bind = "tcp://127.0.0.1:*";
  options.connection.register_timeout = absl::Seconds(1);
  ServerNode node(options);
  const absl::Time start = absl::Now();
  const absl::Status status = node.Run();
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_EQ(status.message(),
            "no answer from the scheduler at tcp://127.0.0.1:1 within 1s: is it running, "
            "reachable, and expecting this many nodes?");
  // It waited out the register timeout (less the transport's 50 ms deadline tick), no longer.
  EXPECT_GE(took, absl::Seconds(1));
  EXPECT_LT(took, absl::Seconds(30));
}

// Registers a server as the replacement of lost rank 0 of a one-worker asp job and records
// when its heartbeats arrive.
class ReplacingScheduler : public RequestHandler {
 public:
  void HandleRequest(Message request, Responder responder) override {
    if (request.header.type() == proto::HEARTBEAT) {
      {
        absl::MutexLock lock(&mu_);
        heartbeats_.push_back(absl::Now());
      }
      responder.Reply(Message());
      return;
    }
    if (request.header.type() != proto::REGISTER) {
      responder.ReplyStatus(absl::UnimplementedError("not in this fake"));
      return;
    }
    Message reply;
    proto::RegisterReply* reg = reply.header.mutable_register_reply();
    reg->set_scheduler_id("fake-scheduler");
    reg->set_joined_running_job(true);
    proto::AddressBook* book = reg->mutable_book();
    book->set_sync(proto::ASP);
    book->set_job_id("restoring");
    book->set_partition_bytes(1 << 20);
    book->set_heartbeat_timeout_ms(600);
    book->add_servers()->set_endpoint(request.header.register_request().endpoint());
    book->add_workers()->set_routing_id("w0");
    proto::TensorSpec* t = book->add_model();
    t->set_name("w");
    t->set_num_elements(16);
    responder.Reply(std::move(reply));
  }
  std::vector<absl::Time> heartbeats() {
    absl::MutexLock lock(&mu_);
    return heartbeats_;
  }

 private:
  absl::Mutex mu_;
  std::vector<absl::Time> heartbeats_ ABSL_GUARDED_BY(mu_);
};

// Lists directories slowly (as a restore from a large shard on a slow disk takes its time).
class SlowListingEnv : public EnvWrapper {
 public:
  SlowListingEnv() : EnvWrapper(Env::Default()) {}
  absl::StatusOr<std::vector<std::string>> GetChildren(const std::string& dir) override {
    absl::MutexLock lock(&mu_);
    if (began_ == absl::InfinitePast()) began_ = absl::Now();
    absl::SleepFor(absl::Seconds(1));
    ended_ = absl::Now();
    return EnvWrapper::GetChildren(dir);
  }
  absl::Mutex mu_;
  absl::Time began_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time ended_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

TEST(ServerNodeTest, AReplacementHeartbeatsWhileItRestoresItsShard) {
  ReplacingScheduler fake;
  absl::StatusOr<std::unique_ptr<Transport>> scheduler = Transport::Create(TransportOptions());
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  (*scheduler)->Start(&fake);
  SlowListingEnv env;
  ServerNodeOptions options;
  options.connection.scheduler = (*scheduler)->endpoint();
  options.connection.bind = "tcp://127.0.0.1:*";
  options.connection.heartbeat_period = absl::Milliseconds(50);
  options.checkpoint.dir = ::testing::TempDir() + "/restoring-empty";
  options.checkpoint.env = &env;
  {
    ServerNode node(options);
    // Nothing to restore from: the slow listing ends in an error, as a failed restore does.
    const absl::Status status = node.Run();
    EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
    EXPECT_NE(status.message().find("cannot replace the lost server: no checkpoint of server 0"),
              absl::string_view::npos)
        << status;
  }
  (*scheduler)->Stop();
  absl::MutexLock lock(&env.mu_);
  ASSERT_NE(env.ended_, absl::InfinitePast());
  int during = 0;
  for (absl::Time beat : fake.heartbeats()) during += beat > env.began_ && beat < env.ended_;
  // About 20 in the second the listing took; without heartbeats during a restore, none.
  EXPECT_GE(during, 5);
}

}  // namespace
}  // namespace r2sp
