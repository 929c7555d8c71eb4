// ServerNode's failures end Run() with a clear error instead of a hang or an exit. (Its whole
// life in a job runs in tests/integration, through the server binary.)
#include "server/server_node.h"

#include "absl/time/clock.h"
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

}  // namespace
}  // namespace r2sp
