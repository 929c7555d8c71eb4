// The heartbeats' news versions end to end: SchedulerClients against a real SchedulerCore on
// the in-process network. A node's heartbeats say which news version it has taken in (the
// newest answer's), so the scheduler tells it only what is new; HeartbeatNow hears everything.
// Heartbeats answered after the node's LEAVE arrived are no verdict.
#include "common/scheduler_client.h"

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "scheduler/scheduler_core.h"
#include "tests/testing/in_process_network.h"

namespace r2sp {
namespace {

// The scheduler, and what each heartbeat it handled said it had seen (by sender rank, workers
// after servers: this job has one server).
class SeenRecorder : public RequestHandler {
 public:
  explicit SeenRecorder(RequestHandler* core) : core_(core) {}
  void HandleRequest(Message request, Responder responder) override {
    if (request.header.type() == proto::HEARTBEAT) {
      absl::MutexLock lock(&mu_);
      seen_[request.header.sender_role() == proto::SERVER ? 0 : 1 + request.header.sender_rank()]
          .push_back(request.header.heartbeat().news_seen());
    }
    core_->HandleRequest(std::move(request), std::move(responder));
  }
  void OnTick(absl::Time now) override { core_->OnTick(now); }
  absl::Time NextWakeup() override { return core_->NextWakeup(); }
  std::vector<int64_t> Seen(int node) {
    absl::MutexLock lock(&mu_);
    return seen_[node];
  }

 private:
  RequestHandler* const core_;
  absl::Mutex mu_;
  std::vector<int64_t> seen_[3] ABSL_GUARDED_BY(mu_);
};

SchedulerClientOptions ClientOptions(const std::string& name) {
  SchedulerClientOptions options;
  options.scheduler = "scheduler";
  options.endpoint = name;
  options.register_timeout = absl::Seconds(20);
  options.heartbeat_period = absl::Milliseconds(20);
  return options;
}

// The job RegisterJob registers.
SchedulerOptions OneServerTwoWorkers() {
  SchedulerOptions options;
  options.num_servers = 1;
  options.num_workers = 2;
  return options;
}

// Clients "s0" (the server), "w0" and "w1" (workers) registered with the scheduler served on
// `network` (OneServerTwoWorkers), in that order in the vector; the workers ask for the ranks
// `asked` (-1: none).
std::vector<std::unique_ptr<SchedulerClient>> RegisterJob(testing::InProcessNetwork& network,
                                                          std::vector<int> asked = {-1, -1}) {
  std::vector<std::unique_ptr<SchedulerClient>> clients;
  for (const char* name : {"s0", "w0", "w1"}) {
    clients.push_back(std::make_unique<SchedulerClient>(network.Client(name), ClientOptions(name)));
  }
  std::vector<proto::TensorSpec> model(1);
  model[0].set_name("w");
  model[0].set_num_elements(10);
  std::vector<std::thread> registering;
  for (int i = 0; i < 3; ++i) {
    registering.emplace_back([&clients, &model, &asked, i] {
      const absl::StatusOr<proto::RegisterReply> reply =
          i == 0 ? clients[i]->Register(proto::SERVER, {})
                 : clients[i]->Register(proto::WORKER, model, false, asked[i - 1]);
      EXPECT_TRUE(reply.ok()) << reply.status();
    });
  }
  for (std::thread& t : registering) t.join();
  return clients;
}

TEST(SchedulerClientTest, HeartbeatsSayTheNewsTakenInAndHeartbeatNowHearsEverything) {
  testing::InProcessNetwork network;
  SchedulerCore core(OneServerTwoWorkers(), network.Client("scheduler"));
  SeenRecorder recorder(&core);
  network.Serve("scheduler", &recorder);
  std::vector<std::unique_ptr<SchedulerClient>> clients = RegisterJob(network);
  // The workers' ranks follow the order they registered in, which the threads race for.
  const int finisher = clients[2]->rank();

  absl::Mutex mu;
  std::vector<int> finished_heard;  // every finished rank the server's answers named
  absl::Notification heard;
  clients[0]->StartHeartbeats([&](const proto::HeartbeatReply& beat) {
    absl::MutexLock lock(&mu);
    for (int rank : beat.finished_workers()) finished_heard.push_back(rank);
    if (beat.news_version() == 1 && !heard.HasBeenNotified()) heard.Notify();
  });
  clients[1]->StartHeartbeats(nullptr);  // w0 keeps beating: the job goes on
  const size_t beats_before_finish = recorder.Seen(0).size();
  ASSERT_TRUE(clients[2]->Finish(proto::NodeCounters()).ok());  // news 1: w1 finished
  ASSERT_TRUE(heard.WaitForNotificationWithTimeout(absl::Seconds(10)));
  // The server's beats go on from news_seen 0 to 1 and never past it; only the answers to
  // beats that said 0 after the finish name w1 (those sent before the first such answer
  // arrived repeat it), not the answers to the beats that said 1.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  std::vector<int64_t> seen;
  while (absl::Now() < deadline) {
    seen = recorder.Seen(0);
    if (std::count(seen.begin(), seen.end(), 1) >= 5) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_GE(std::count(seen.begin(), seen.end(), 1), 5);
  EXPECT_EQ(seen.front(), 0);
  for (size_t i = 1; i < seen.size(); ++i) {
    EXPECT_LE(seen[i - 1], seen[i]) << i;
    EXPECT_LE(seen[i], 1) << i;
  }
  const int64_t zeros_since_finish =
      std::count(seen.begin() + beats_before_finish, seen.end(), int64_t{0});
  {
    absl::MutexLock lock(&mu);
    EXPECT_GE(finished_heard.size(), 1u);
    EXPECT_LE(static_cast<int64_t>(finished_heard.size()), zeros_since_finish);
    for (int rank : finished_heard) EXPECT_EQ(rank, finisher);
  }
  // w0's beats took the news in too; asked now, it still hears all of it.
  absl::StatusOr<proto::HeartbeatReply> now = clients[1]->HeartbeatNow();
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_EQ(std::vector<int>(now->finished_workers().begin(), now->finished_workers().end()),
            std::vector<int>{finisher});
  EXPECT_EQ(now->news_version(), 1);
  clients[0]->StopHeartbeats();
  clients[1]->StopHeartbeats();
}


// A worker leaving (SIGTERM) keeps heartbeating until its LEAVE is answered; the heartbeats
// the scheduler answers after the LEAVE arrived are no verdict. Before the fix their answers
// said "declared dead", and a worker that heard one before its LEAVE's answer stopped as lost
// and never said it had left (k8s_faults_test's stopped pod, rarely).
TEST(SchedulerClientTest, HeartbeatsAnsweredAfterALeaveAreNoVerdict) {
  testing::InProcessNetwork network;
  SchedulerCore core(OneServerTwoWorkers(), network.Client("scheduler"));
  network.Serve("scheduler", &core);
  std::vector<std::unique_ptr<SchedulerClient>> clients = RegisterJob(network);
  SchedulerClient& leaving = *clients[1];
  absl::Mutex mu;
  std::vector<std::string> fatal;
  leaving.StartHeartbeats(nullptr, [&](const std::string& why) {
    absl::MutexLock lock(&mu);
    fatal.push_back(why);
  });
  absl::SleepFor(absl::Milliseconds(100));  // heartbeats answered as a live node's
  EXPECT_TRUE(leaving.Leave("signal 15", proto::NodeCounters()).ok());
  absl::SleepFor(absl::Milliseconds(100));  // five more heartbeats, answered after the leave
  leaving.StopHeartbeats();
  absl::MutexLock lock(&mu);
  EXPECT_EQ(fatal, std::vector<std::string>{});
}

// Whichever registers first, the worker that asked for rank 1 gets it and the other takes the
// rank left; a rank the job does not have is refused with the scheduler's words.
TEST(SchedulerClientTest, AWorkerGetsTheRankItAskedFor) {
  // Each network stops its loop (reset) before the scheduler it serves goes, so no tick reaches
  // a scheduler already destroyed.
  auto network = std::make_unique<testing::InProcessNetwork>();
  auto core = std::make_unique<SchedulerCore>(OneServerTwoWorkers(), network->Client("scheduler"));
  network->Serve("scheduler", core.get());
  std::vector<std::unique_ptr<SchedulerClient>> clients = RegisterJob(*network, {1, -1});
  EXPECT_EQ(clients[1]->rank(), 1);
  EXPECT_EQ(clients[2]->rank(), 0);
  clients.clear();
  network.reset();

  auto other = std::make_unique<testing::InProcessNetwork>();
  auto refusing =
      std::make_unique<SchedulerCore>(OneServerTwoWorkers(), other->Client("scheduler"));
  other->Serve("scheduler", refusing.get());
  {
    SchedulerClient client(other->Client("w"), ClientOptions("w"));
    std::vector<proto::TensorSpec> model(1);
    model[0].set_name("w");
    model[0].set_num_elements(10);
    EXPECT_EQ(client.Register(proto::WORKER, model, false, 2).status(),
              absl::InvalidArgumentError("registration refused: this worker asks for rank 2, "
                                         "but the job has 2 workers (ranks 0 to 1)"));
  }
  other.reset();
}

}  // namespace
}  // namespace r2sp
