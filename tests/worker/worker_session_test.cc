// WorkerSession's lost-to-the-job path (LostHandler, which the worker binary turns into exit
// 3), against a fake scheduler over real sockets: it lets the worker register, holds its first
// barrier, and answers its heartbeats with a verdict (or not at all). The session must call its
// LostHandler once with Aborted(why), and RunWorker must return that error, not the barrier's.
// And RunWorker returns the options' Validate() error before anything starts. (A whole job runs
// in tests/integration, through the binaries.)
#include "worker/worker_session.h"

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/handler.h"
#include "common/transport.h"
#include "gtest/gtest.h"
#include "worker/synthetic_trainer.h"
#include "worker/trainer.h"
#include "worker/worker_options.h"

namespace r2sp {
namespace {

// How the fake scheduler answers heartbeats.
enum class Verdict { kDeclaredDead, kJobFailed, kSilence };

// One worker's scheduler, registered at once; held barriers are failed by FailBarriers().
class FakeScheduler : public RequestHandler {
 public:
  explicit FakeScheduler(Verdict verdict) : verdict_(verdict) {}

  void HandleRequest(Message request, Responder responder) override {
    switch (request.header.type()) {
      case proto::REGISTER:
        responder.Reply(RegisterReply(request.header.register_request()));
        return;
      case proto::BARRIER: {
        absl::MutexLock lock(&mu_);
        held_.push_back(std::move(responder));
        barrier_held_.Notify();
        return;
      }
      case proto::HEARTBEAT: {
        if (verdict_ == Verdict::kSilence) return;  // the worker's request times out
        Message reply;
        proto::HeartbeatReply* beat = reply.header.mutable_heartbeat_reply();
        if (verdict_ == Verdict::kDeclaredDead) beat->set_declared_dead(true);
        if (verdict_ == Verdict::kJobFailed) beat->set_job_failed("server 0 was lost");
        responder.Reply(std::move(reply));
        return;
      }
      default:
        responder.ReplyStatus(absl::UnimplementedError("not in this fake"));
    }
  }

  // Waits (up to 30 s) until the worker waits at its first barrier.
  bool AwaitBarrier() { return barrier_held_.WaitForNotificationWithTimeout(absl::Seconds(30)); }
  void FailBarriers() {
    absl::MutexLock lock(&mu_);
    for (Responder& r : held_) r.ReplyStatus(absl::UnavailableError("the test ends the job"));
    held_.clear();
  }

 private:
  // Rank 0 of a one-worker asp job on one server that nobody serves (the worker never gets
  // past its first barrier to use it).
  static Message RegisterReply(const proto::RegisterRequest& request) {
    Message reply;
    proto::RegisterReply* reg = reply.header.mutable_register_reply();
    reg->set_rank(0);
    reg->set_scheduler_id("fake-scheduler");
    proto::AddressBook* book = reg->mutable_book();
    book->set_sync(proto::ASP);
    book->set_partition_bytes(1 << 20);
    book->set_heartbeat_timeout_ms(3000);
    proto::NodeInfo* server = book->add_servers();
    server->set_rank(0);
    server->set_endpoint("tcp://127.0.0.1:1");
    proto::NodeInfo* worker = book->add_workers();
    worker->set_rank(0);
    worker->set_endpoint(request.endpoint());
    for (const proto::TensorSpec& t : request.model()) *book->add_model() = t;
    return reply;
  }

  const Verdict verdict_;
  absl::Notification barrier_held_;
  absl::Mutex mu_;
  std::vector<Responder> held_ ABSL_GUARDED_BY(mu_);
};

struct Outcome {
  std::vector<absl::Status> lost;  // what the LostHandler was called with, in order
  absl::Status run;                // what Run() returned
};

// Runs a synthetic worker against a FakeScheduler answering heartbeats with `verdict`.
Outcome RunAgainst(Verdict verdict) {
  FakeScheduler fake(verdict);
  absl::StatusOr<std::unique_ptr<Transport>> scheduler = Transport::Create(TransportOptions());
  EXPECT_TRUE(scheduler.ok()) << scheduler.status();
  if (!scheduler.ok()) return {};
  (*scheduler)->Start(&fake);

  WorkerOptions options;
  options.model = "synthetic";
  options.model_mb = 0.25;
  options.layers = 1;
  options.connection.scheduler = (*scheduler)->endpoint();
  options.connection.bind = "tcp://127.0.0.1:*";
  options.connection.heartbeat_period = absl::Milliseconds(20);
  options.connection.scheduler_timeout = absl::Milliseconds(300);
  absl::Mutex mu;
  Outcome outcome;
  absl::Notification lost;
  WorkerSession session(options, [&](const absl::Status& status) {
    absl::MutexLock lock(&mu);
    outcome.lost.push_back(status);
    lost.Notify();
  });
  SyntheticTrainer trainer(options);
  absl::Status run;
  std::thread worker([&session, &trainer, &run] { run = RunWorker(&session, &trainer); });
  EXPECT_TRUE(fake.AwaitBarrier());
  EXPECT_TRUE(lost.WaitForNotificationWithTimeout(absl::Seconds(30)));
  absl::SleepFor(absl::Milliseconds(100));  // more verdicts arrive meanwhile: still one call
  fake.FailBarriers();
  worker.join();
  (*scheduler)->Stop();
  absl::MutexLock lock(&mu);
  outcome.run = run;
  return outcome;
}

TEST(WorkerSessionTest, DeclaredDeadCallsTheLostHandlerOnceAndRunReturnsWhy) {
  const Outcome outcome = RunAgainst(Verdict::kDeclaredDead);
  const absl::Status want = absl::AbortedError(
      "the scheduler declared this node dead (it was silent or made no progress for too long) "
      "and goes on without it");
  ASSERT_EQ(outcome.lost.size(), 1u);
  EXPECT_EQ(outcome.lost[0], want);
  EXPECT_EQ(outcome.run, want);  // not the failed barrier's error
}

TEST(WorkerSessionTest, AFailedJobCallsTheLostHandlerWithTheSchedulersReason) {
  const Outcome outcome = RunAgainst(Verdict::kJobFailed);
  const absl::Status want = absl::AbortedError("the job failed: server 0 was lost");
  ASSERT_EQ(outcome.lost.size(), 1u);
  EXPECT_EQ(outcome.lost[0], want);
  EXPECT_EQ(outcome.run, want);
}

TEST(WorkerSessionTest, ASilentSchedulerIsLostAfterTheSchedulerTimeout) {
  const Outcome outcome = RunAgainst(Verdict::kSilence);
  ASSERT_EQ(outcome.lost.size(), 1u);
  EXPECT_EQ(outcome.lost[0].code(), absl::StatusCode::kAborted);
  const std::string prefix = "lost the scheduler at tcp://127.0.0.1:";
  EXPECT_EQ(outcome.lost[0].message().substr(0, prefix.size()), prefix) << outcome.lost[0];
  EXPECT_NE(outcome.lost[0].message().find(": no heartbeat answered for "), std::string::npos)
      << outcome.lost[0];
  EXPECT_EQ(outcome.run, outcome.lost[0]);
}

TEST(WorkerSessionTest, RunWorkerReturnsTheValidateErrorBeforeAnythingStarts) {
  WorkerOptions options;
  options.loop.epochs = 0;
  options.connection.bind = "tcp://no-such-interface-r2sp:*";  // never reached
  WorkerSession session(options);
  SyntheticTrainer trainer(options);
  const absl::Status status = RunWorker(&session, &trainer);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "--epochs (WorkerOptions.loop.epochs) must be >= 1, got 0");
}

TEST(WorkerSessionTest, JoinReturnsTheSessionOptionsValidateErrorBeforeConnecting) {
  SessionOptions options;
  options.batch_size = 0;
  options.connection.bind = "tcp://no-such-interface-r2sp:*";  // never reached
  WorkerSession session(options);
  const absl::Status status = session.Join({}, false);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "--batch_size (SessionOptions.batch_size) must be in [1, 65536], "
                              "got 0");
}

}  // namespace
}  // namespace r2sp
