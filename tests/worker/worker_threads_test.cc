// worker_threads.h: each thread's options (files of its own, the shared ZeroMQ context), and
// RunWorkerThreads against a fake scheduler over real sockets that registers the workers, holds
// their first barrier, and refuses one thread's registration: that thread's error comes back,
// named, and the others are cancelled instead of waiting at the barrier. (A whole job of
// threaded workers runs in tests/integration/scale_test.cc, through the binaries.)
#include "worker/worker_threads.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/handler.h"
#include "common/transport.h"
#include "gtest/gtest.h"

namespace r2sp {
namespace {

TEST(ThreadFilePathTest, PutsTheThreadBeforeTheExtensionOfTheLastComponent) {
  EXPECT_EQ(ThreadFilePath("/run/metrics_worker3.jsonl", 2), "/run/metrics_worker3_t2.jsonl");
  EXPECT_EQ(ThreadFilePath("/run.d/dump", 0), "/run.d/dump_t0");
  EXPECT_EQ(ThreadFilePath("timeline.json", 11), "timeline_t11.json");
  EXPECT_EQ(ThreadFilePath("/run/.hidden", 1), "/run/.hidden_t1");
  EXPECT_EQ(ThreadFilePath("", 1), "");
}

TEST(ThreadWorkerOptionsTest, GivesEachThreadItsFilesAndTheSharedContext) {
  WorkerOptions options;
  options.workers_per_process = 4;
  options.metrics_path = "/r/m.jsonl";
  options.timeline_path = "/r/t.json";
  auto context = std::make_shared<zmq::context_t>(1);
  const WorkerOptions o = ThreadWorkerOptions(options, 3, context);
  EXPECT_EQ(o.workers_per_process, 1);
  EXPECT_EQ(o.metrics_path, "/r/m_t3.jsonl");
  EXPECT_EQ(o.timeline_path, "/r/t_t3.json");
  EXPECT_EQ(o.dump_params_path, "");
  EXPECT_EQ(o.connection.zmq_context, context);
  options.connection.curve = std::make_shared<JobKeys>();
  EXPECT_EQ(ThreadWorkerOptions(options, 0, context).connection.zmq_context, nullptr);
}

TEST(ThreadWorkerOptionsTest, ThreadsAskForTheRanksFromTheOneAskedFor) {
  WorkerOptions options;
  options.workers_per_process = 3;
  EXPECT_EQ(ThreadWorkerOptions(options, 2, nullptr).rank, -1);  // none asked: none asks
  options.rank = 4;
  EXPECT_EQ(ThreadWorkerOptions(options, 0, nullptr).rank, 4);
  EXPECT_EQ(ThreadWorkerOptions(options, 2, nullptr).rank, 6);
}

TEST(WorkerOptionsTest, MoreThanOneWorkerPerProcessNeedsTheSyntheticModel) {
  WorkerOptions options;
  options.workers_per_process = 2;
  EXPECT_TRUE(options.Validate().ok()) << options.Validate();
  options.model = "cnn";
  EXPECT_EQ(options.Validate(),
            absl::InvalidArgumentError(
                "--workers_per_process (WorkerOptions.workers_per_process) above 1 is for the "
                "synthetic model only (--model=synthetic): real models load their data and "
                "network once per process"));
  options.model = "synthetic";
  options.workers_per_process = 0;
  EXPECT_FALSE(options.Validate().ok());
}

// Registers workers in the order they ask (ranks 0, 1, ...) but refuses the registration with
// index `refuse`; holds every barrier until FailBarriers; answers heartbeats.
class FakeScheduler : public RequestHandler {
 public:
  explicit FakeScheduler(int refuse) : refuse_(refuse) {}

  void HandleRequest(Message request, Responder responder) override {
    absl::MutexLock lock(&mu_);
    switch (request.header.type()) {
      case proto::REGISTER:
        if (registrations_++ == refuse_) {
          responder.ReplyStatus(absl::FailedPreconditionError("the test refuses this one"));
        } else {
          responder.Reply(RegisterReply(ranks_++, request.header.register_request()));
        }
        return;
      case proto::BARRIER:
        held_.push_back(std::move(responder));
        return;
      case proto::HEARTBEAT: {
        Message reply;
        reply.header.mutable_heartbeat_reply();
        responder.Reply(std::move(reply));
        return;
      }
      default:
        responder.ReplyStatus(absl::UnimplementedError("not in this fake"));
    }
  }

  void FailBarriers() {
    absl::MutexLock lock(&mu_);
    for (Responder& r : held_) r.ReplyStatus(absl::UnavailableError("the test ends the job"));
    held_.clear();
  }

 private:
  static Message RegisterReply(int rank, const proto::RegisterRequest& request) {
    Message reply;
    proto::RegisterReply* reg = reply.header.mutable_register_reply();
    reg->set_rank(rank);
    reg->set_scheduler_id("fake-scheduler");
    proto::AddressBook* book = reg->mutable_book();
    book->set_sync(proto::ASP);
    book->set_partition_bytes(1 << 20);
    book->set_heartbeat_timeout_ms(3000);
    proto::NodeInfo* server = book->add_servers();
    server->set_rank(0);
    server->set_endpoint("tcp://127.0.0.1:1");
    proto::NodeInfo* worker = book->add_workers();
    worker->set_rank(rank);
    worker->set_endpoint(request.endpoint());
    for (const proto::TensorSpec& t : request.model()) *book->add_model() = t;
    return reply;
  }

  const int refuse_;
  absl::Mutex mu_;
  int registrations_ ABSL_GUARDED_BY(mu_) = 0;
  int ranks_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Responder> held_ ABSL_GUARDED_BY(mu_);
};

TEST(RunWorkerThreadsTest, OneThreadsErrorComesBackNamedAndCancelsTheOthers) {
  FakeScheduler fake(/*refuse=*/2);
  absl::StatusOr<std::unique_ptr<Transport>> scheduler = Transport::Create(TransportOptions());
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  (*scheduler)->Start(&fake);
  WorkerOptions options;
  options.model_mb = 0.25;
  options.layers = 1;
  options.workers_per_process = 4;
  options.connection.scheduler = (*scheduler)->endpoint();
  options.connection.bind = "tcp://127.0.0.1:*";
  options.connection.heartbeat_period = absl::Milliseconds(50);
  const absl::Time start = absl::Now();
  const absl::Status status = RunWorkerThreads(options, nullptr);
  const absl::Duration took = absl::Now() - start;
  fake.FailBarriers();
  (*scheduler)->Stop();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  const std::string want = "registration refused: the test refuses this one";
  EXPECT_NE(status.message().find(want), std::string::npos) << status;
  EXPECT_EQ(status.message().substr(0, 14), "worker thread ") << status;
  // The three registered ones waited at the barrier (30 minutes) until cancelled.
  EXPECT_LT(took, absl::Seconds(20));
}

TEST(RunWorkerThreadsTest, RefusesInvalidOptionsBeforeStartingAnything) {
  WorkerOptions options;
  options.model = "mlp";
  options.workers_per_process = 2;
  EXPECT_EQ(RunWorkerThreads(options, nullptr).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace r2sp
