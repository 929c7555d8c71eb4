// The scheduler's protocol logic without sockets: rendezvous, barriers, failure detection,
// the end of the job.
#include "scheduler/scheduler_core.h"

#include <string>
#include <vector>

#include "common/book_frame.h"
#include "gtest/gtest.h"
#include "tests/testing/fakes.h"
#include "tests/testing/json.h"

namespace r2sp {
namespace {

using testing::RecordingRequester;
using testing::RecordingSink;

class SchedulerCoreTest : public ::testing::Test {
 protected:
  SchedulerCoreTest() {
    options_.num_servers = 1;
    options_.num_workers = 2;
    options_.heartbeat_timeout = absl::Seconds(3);
    core_ = std::make_unique<SchedulerCore>(options_, &requester_, [this] { return now_; });
  }

  void Send(Message m, const std::string& who) {
    Responder r(&sink_, who, m.header);
    core_->HandleRequest(std::move(m), std::move(r));
  }

  void Register(proto::Role role, const std::string& id, int model_elements = 10) {
    Message m;
    m.header.set_type(proto::REGISTER);
    auto* reg = m.header.mutable_register_request();
    reg->set_role(role);
    reg->set_endpoint("tcp://127.0.0.1:1/" + id);
    reg->set_instance_id(id);
    if (role == proto::WORKER) {
      auto* t = reg->add_model();
      t->set_name("w");
      t->set_num_elements(model_elements);
    }
    Send(std::move(m), id);
  }

  Message From(proto::Role role, int rank, proto::MsgType type) {
    Message m;
    m.header.set_type(type);
    m.header.set_sender_role(role);
    m.header.set_sender_rank(rank);
    return m;
  }

  void Barrier(proto::Role role, int rank, proto::Group group, uint64_t id) {
    Message m = From(role, rank, proto::BARRIER);
    m.header.mutable_barrier()->set_group(group);
    m.header.mutable_barrier()->set_barrier_id(id);
    // Over the node's own connection: RegisterAll's ids are "s0", "w0", "w1".
    Send(std::move(m), (role == proto::SERVER ? "s" : "w") + std::to_string(rank));
  }

  // An r2sp job with hetero batching (global batch 64) and a third worker ("w2") whose join
  // waits for server 0's MEMBERSHIP acknowledgement.
  void StartHeteroJobWithAJoinerWaiting() {
    options_.sync = proto::R2SP;
    options_.slots.hetero_batching = true;
    options_.slots.batching.global_batch = 64;
    core_ = std::make_unique<SchedulerCore>(options_, &requester_, [this] { return now_; });
    RegisterAll();
    Register(proto::WORKER, "w2");  // waits for server 0's MEMBERSHIP acknowledgement
    EXPECT_TRUE(sink_.Take().empty());
  }

  // A worker `id` registering with the running job, wanting a dead worker's data shard.
  void RegisterJoiner(const std::string& id) {
    Message m;
    m.header.set_type(proto::REGISTER);
    auto* reg = m.header.mutable_register_request();
    reg->set_role(proto::WORKER);
    reg->set_endpoint("tcp://127.0.0.1:1/" + id);
    reg->set_instance_id(id);
    reg->set_wants_data_shard(true);
    auto* t = reg->add_model();
    t->set_name("w");
    t->set_num_elements(10);
    Send(std::move(m), id);
  }

  // Every server acknowledges the MEMBERSHIP requests sent so far.
  void AckJoins() {
    for (auto& sent : requester_.sent) {
      Message ack;
      ack.header.set_is_reply(true);
      sent.callback(std::move(ack));
    }
    requester_.sent.clear();
  }

  // At `second` s after the start, server 0 and worker 0 send heartbeats (worker 1 is silent),
  // the scheduler ticks and the servers acknowledge its MEMBERSHIP requests.
  void BeatAndTick(int second) {
    now_ = start_ + absl::Seconds(second);
    Send(From(proto::SERVER, 0, proto::HEARTBEAT), "s0");
    Send(From(proto::WORKER, 0, proto::HEARTBEAT), "w0");
    core_->OnTick(now_);
    AckJoins();
  }

  void RegisterAll() {
    Register(proto::SERVER, "s0");
    Register(proto::WORKER, "w0");
    Register(proto::WORKER, "w1");
    ASSERT_EQ(sink_.Take().size(), 3u);
  }

  SchedulerOptions options_;
  absl::Time start_ = absl::FromUnixSeconds(1000);
  absl::Time now_ = start_;
  RecordingSink sink_;
  RecordingRequester requester_;
  std::unique_ptr<SchedulerCore> core_;
};

TEST_F(SchedulerCoreTest, RepliesToEveryoneOnceAllRegistered) {
  Register(proto::WORKER, "w0");
  Register(proto::SERVER, "s0");
  EXPECT_TRUE(sink_.Take().empty());
  Register(proto::WORKER, "w1");
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 3u);
  for (auto& [who, reply] : replies) {
    ASSERT_EQ(reply.header.code(), proto::OK) << reply.header.error();
    const proto::RegisterReply r = RegisterReplyOf(reply).value();
    EXPECT_EQ(r.book().servers_size(), 1);
    EXPECT_EQ(r.book().workers_size(), 2);
    EXPECT_EQ(r.book().model_size(), 1);
    if (who == "w0") {
      EXPECT_EQ(r.rank(), 0);
    }
    if (who == "w1") {
      EXPECT_EQ(r.rank(), 1);
    }
    if (who == "s0") {
      EXPECT_EQ(r.rank(), 0);
    }
  }
  Register(proto::SERVER, "s1");  // too late: servers never join a running job
  replies = sink_.Take();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].second.header.code(), proto::FAILED_PRECONDITION);
}

TEST_F(SchedulerCoreTest, RejectsMismatchedModelsAndMalformedRegistrations) {
  Register(proto::WORKER, "w0", 10);
  Register(proto::WORKER, "w1", 11);
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].first, "w1");
  EXPECT_EQ(replies[0].second.header.code(), proto::INVALID_ARGUMENT);
  Message empty;
  empty.header.set_type(proto::REGISTER);
  Send(std::move(empty), "x");
  replies = sink_.Take();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].second.header.code(), proto::INVALID_ARGUMENT);
}

TEST_F(SchedulerCoreTest, BarrierWaitsForEveryLiveMember) {
  RegisterAll();
  Barrier(proto::WORKER, 0, proto::WORKERS, 0);
  EXPECT_TRUE(sink_.Take().empty());
  Barrier(proto::WORKER, 0, proto::WORKERS, 0);  // twice from the same worker
  EXPECT_EQ(sink_.Take()[0].second.header.code(), proto::FAILED_PRECONDITION);
  Barrier(proto::SERVER, 0, proto::WORKERS, 0);  // not a member
  EXPECT_EQ(sink_.Take()[0].second.header.code(), proto::INVALID_ARGUMENT);
  Barrier(proto::WORKER, 1, proto::WORKERS, 0);
  EXPECT_EQ(sink_.Take().size(), 2u);
  Barrier(proto::WORKER, 1, proto::WORKERS, 0);  // stale id
  EXPECT_EQ(sink_.Take()[0].second.header.code(), proto::INVALID_ARGUMENT);
}

TEST_F(SchedulerCoreTest, DeadWorkerIsDetectedAndReleasesTheBarrier) {
  RegisterAll();
  Barrier(proto::WORKER, 0, proto::WORKERS, 0);
  // Worker 0 and the server keep beating; worker 1 falls silent.
  for (int s = 1; s <= 4; ++s) {
    now_ = start_ + absl::Seconds(s);
    Send(From(proto::SERVER, 0, proto::HEARTBEAT), "s0");
    Send(From(proto::WORKER, 0, proto::HEARTBEAT), "w0");
    core_->OnTick(now_);
  }
  auto replies = sink_.Take();
  // The heartbeats' replies (8) and, once worker 1 is dead, the barrier's release.
  ASSERT_EQ(replies.size(), 9u);
  EXPECT_EQ(replies.back().first, "w0");  // the barrier, released last
  EXPECT_EQ(replies.back().second.header.type(), proto::BARRIER);
  Send(From(proto::WORKER, 0, proto::HEARTBEAT), "w0");
  replies = sink_.Take();
  ASSERT_EQ(replies.size(), 1u);
  const proto::HeartbeatReply& last = replies[0].second.header.heartbeat_reply();
  ASSERT_EQ(last.dead_workers_size(), 1);
  EXPECT_EQ(last.dead_workers(0), 1);
  // The dead stay dead: a heartbeat hears it (and the worker stops), anything else is refused.
  Send(From(proto::WORKER, 1, proto::HEARTBEAT), "w1");
  EXPECT_TRUE(sink_.Take()[0].second.header.heartbeat_reply().declared_dead());
  Send(From(proto::WORKER, 1, proto::FINISH), "w1");
  EXPECT_EQ(sink_.Take()[0].second.header.code(), proto::FAILED_PRECONDITION);
}

// A heartbeat reply names the workers that died or finished after the news version its sender
// says it has taken in (news_seen); one that says 0 hears all of them, as every reply did when
// each was a scan of every worker.
TEST_F(SchedulerCoreTest, HeartbeatRepliesTellOnlyTheNewsAfterTheVersionSeen) {
  RegisterAll();
  auto server_beat = [this](int64_t seen) {
    Message m = From(proto::SERVER, 0, proto::HEARTBEAT);
    m.header.mutable_heartbeat()->set_news_seen(seen);
    Send(std::move(m), "s0");
    std::vector<std::pair<std::string, Message>> replies = sink_.Take();
    EXPECT_EQ(replies.size(), 1u);
    return replies.empty() ? proto::HeartbeatReply()
                           : replies.back().second.header.heartbeat_reply();
  };
  auto ranks = [](const google::protobuf::RepeatedField<int32_t>& r) {
    return std::vector<int>(r.begin(), r.end());
  };
  proto::HeartbeatReply beat = server_beat(0);
  EXPECT_EQ(beat.news_version(), 0);
  EXPECT_EQ(beat.dead_workers_size() + beat.finished_workers_size(), 0);

  Send(From(proto::WORKER, 1, proto::FINISH), "w1");
  sink_.Take();
  beat = server_beat(0);
  EXPECT_EQ(ranks(beat.finished_workers()), std::vector<int>{1});
  EXPECT_EQ(beat.news_version(), 1);
  beat = server_beat(1);  // taken in: nothing new
  EXPECT_EQ(beat.dead_workers_size() + beat.finished_workers_size(), 0);
  EXPECT_EQ(beat.news_version(), 1);

  for (int s = 1; s <= 4; ++s) {  // worker 0 falls silent
    now_ = start_ + absl::Seconds(s);
    server_beat(1);
    core_->OnTick(now_);
  }
  sink_.Take();
  beat = server_beat(1);
  EXPECT_EQ(ranks(beat.dead_workers()), std::vector<int>{0});
  EXPECT_EQ(beat.finished_workers_size(), 0);
  EXPECT_EQ(beat.news_version(), 2);
  beat = server_beat(0);  // everything, as before the versions
  EXPECT_EQ(ranks(beat.dead_workers()), std::vector<int>{0});
  EXPECT_EQ(ranks(beat.finished_workers()), std::vector<int>{1});
  EXPECT_EQ(beat.news_version(), 2);
}

// A worker that leaves (SIGTERM) is dead at once, long before its heartbeat timeout: the
// barrier it held up is released, the heartbeats name it dead (the evaluating role moves), its
// counters are kept and the report says it left; malformed LEAVEs change nothing.
TEST_F(SchedulerCoreTest, LeavingWorkerIsDeadAtOnce) {
  options_.absorb_orphaned_shards = true;
  core_ = std::make_unique<SchedulerCore>(options_, &requester_, [this] { return now_; });
  RegisterAll();
  Barrier(proto::WORKER, 1, proto::WORKERS, 0);
  EXPECT_TRUE(sink_.Take().empty());
  auto leave = [this](proto::Role role, int rank, const std::string& reason, bool body) {
    Message m = From(role, rank, proto::LEAVE);
    if (body) m.header.mutable_leave()->set_reason(reason);
    m.header.mutable_leave()->mutable_counters()->set_iterations(body ? 17 : 0);
    if (!body) m.header.clear_leave();
    Send(std::move(m), (role == proto::SERVER ? "s" : "w") + std::to_string(rank));
    auto r = sink_.Take();
    EXPECT_GE(r.size(), 1u);
    return r.empty() ? proto::INTERNAL : r[0].second.header.code();
  };
  now_ = start_ + absl::Milliseconds(100);
  EXPECT_EQ(leave(proto::WORKER, 0, "signal 15", false), proto::INVALID_ARGUMENT);
  EXPECT_EQ(leave(proto::WORKER, 0, "", true), proto::INVALID_ARGUMENT);
  EXPECT_EQ(leave(proto::WORKER, 0, std::string(201, 'x'), true), proto::INVALID_ARGUMENT);
  EXPECT_EQ(leave(proto::SERVER, 0, "signal 15", true), proto::INVALID_ARGUMENT);
  // Worker 0 still alive: worker 1 still waits at the barrier.
  Send(From(proto::WORKER, 1, proto::HEARTBEAT), "w1");
  EXPECT_EQ(sink_.Take()[0].second.header.heartbeat_reply().dead_workers_size(), 0);

  Message m = From(proto::WORKER, 0, proto::LEAVE);
  m.header.mutable_leave()->set_reason("signal 15");
  m.header.mutable_leave()->mutable_counters()->set_iterations(17);
  Send(std::move(m), "w0");
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 2u);  // the LEAVE's reply, then the barrier it held up
  EXPECT_EQ(replies[0].first, "w0");
  EXPECT_EQ(replies[0].second.header.code(), proto::OK);
  EXPECT_EQ(replies[1].first, "w1");
  EXPECT_EQ(replies[1].second.header.type(), proto::BARRIER);
  Send(From(proto::WORKER, 1, proto::HEARTBEAT), "w1");
  const proto::HeartbeatReply beat = sink_.Take()[0].second.header.heartbeat_reply();
  ASSERT_EQ(beat.dead_workers_size(), 1);
  EXPECT_EQ(beat.dead_workers(0), 0);
  // A heartbeat it sent beside its LEAVE hears no verdict: it left, it was not declared dead.
  Send(From(proto::WORKER, 0, proto::HEARTBEAT), "w0");
  EXPECT_FALSE(sink_.Take()[0].second.header.heartbeat_reply().declared_dead());
  // Its data shard is free for a joiner, or dealt out from the next epoch.
  Message plan = From(proto::WORKER, 1, proto::EPOCH_PLAN);
  plan.header.mutable_epoch_plan_request()->set_epoch(0);
  Send(std::move(plan), "w1");
  EXPECT_EQ(sink_.Take()[0].second.header.epoch_plan().live_shards_size(), 1);
  // It is dead: anything but a heartbeat from it is refused, and it is not declared dead again.
  Send(From(proto::WORKER, 0, proto::FINISH), "w0");
  EXPECT_EQ(sink_.Take()[0].second.header.code(), proto::FAILED_PRECONDITION);
  const absl::StatusOr<testing::Json> report = testing::ParseJson(core_->ReportJson());
  ASSERT_TRUE(report.ok()) << report.status();
  const testing::Json& left = (*report)["workers"][size_t{0}];
  EXPECT_EQ(left["state"].string, "dead");
  EXPECT_TRUE(left["left"].boolean);
  EXPECT_EQ(left["iterations"].number, 17);
  EXPECT_FALSE((*report)["workers"][size_t{1}]["left"].boolean);
  // The job ends with worker 1 alone.
  Send(From(proto::WORKER, 1, proto::FINISH), "w1");
  EXPECT_EQ(requester_.sent.size(), 1u);  // SHUTDOWN to the server
  EXPECT_TRUE(core_->failure().empty());
}

TEST_F(SchedulerCoreTest, WorkerWhoseProgressStandsStillIsDeclaredDead) {
  options_.progress_timeout = absl::Seconds(5);
  core_ = std::make_unique<SchedulerCore>(options_, &requester_, [this] { return now_; });
  RegisterAll();
  auto beat = [this](proto::Role role, int rank, int64_t progress) {
    Message m = From(role, rank, proto::HEARTBEAT);
    m.header.mutable_heartbeat()->set_progress(progress);
    Send(std::move(m), (role == proto::SERVER ? "s" : "w") + std::to_string(rank));
  };
  // Every second all three beat; worker 0 progresses, worker 1's count is stuck at 7 (a hung
  // training thread whose heartbeat thread still runs).
  for (int s = 1; s <= 7; ++s) {
    now_ = start_ + absl::Seconds(s);
    beat(proto::SERVER, 0, 0);
    beat(proto::WORKER, 0, s);
    beat(proto::WORKER, 1, 7);
    core_->OnTick(now_);
  }
  sink_.Take();
  beat(proto::WORKER, 0, 8);
  const proto::HeartbeatReply seen = sink_.Take()[0].second.header.heartbeat_reply();
  ASSERT_EQ(seen.dead_workers_size(), 1);
  EXPECT_EQ(seen.dead_workers(0), 1);
  EXPECT_NE(core_->ReportJson().find("\"state\": \"dead\""), std::string::npos);
}

TEST_F(SchedulerCoreTest, WorkerWaitingAtABarrierIsNotStalled) {
  options_.progress_timeout = absl::Seconds(2);
  core_ = std::make_unique<SchedulerCore>(options_, &requester_, [this] { return now_; });
  RegisterAll();
  Barrier(proto::WORKER, 0, proto::WORKERS, 0);  // worker 0 waits for worker 1 (which works)
  for (int s = 1; s <= 10; ++s) {
    now_ = start_ + absl::Seconds(s);
    Send(From(proto::SERVER, 0, proto::HEARTBEAT), "s0");
    Send(From(proto::WORKER, 0, proto::HEARTBEAT), "w0");  // progress stays 0
    Message m = From(proto::WORKER, 1, proto::HEARTBEAT);
    m.header.mutable_heartbeat()->set_progress(s);
    Send(std::move(m), "w1");
    core_->OnTick(now_);
  }
  for (const auto& [who, reply] : sink_.Take()) {
    EXPECT_EQ(reply.header.heartbeat_reply().dead_workers_size(), 0) << who;
  }
}

TEST_F(SchedulerCoreTest, LostServerFailsTheJobAndHeartbeatsSaySo) {
  RegisterAll();
  for (int s = 1; s <= 4; ++s) {  // the server falls silent
    now_ = start_ + absl::Seconds(s);
    Send(From(proto::WORKER, 0, proto::HEARTBEAT), "w0");
    Send(From(proto::WORKER, 1, proto::HEARTBEAT), "w1");
    core_->OnTick(now_);
  }
  EXPECT_TRUE(core_->done().HasBeenNotified());
  EXPECT_NE(core_->failure().find("server 0"), std::string::npos) << core_->failure();
  sink_.Take();
  Send(From(proto::WORKER, 0, proto::HEARTBEAT), "w0");
  const proto::HeartbeatReply reply = sink_.Take()[0].second.header.heartbeat_reply();
  EXPECT_NE(reply.job_failed().find("was lost"), std::string::npos) << reply.job_failed();
}

TEST_F(SchedulerCoreTest, JobWhoseWorkersAllDiedFails) {
  RegisterAll();
  for (int s = 1; s <= 4; ++s) {  // both workers fall silent; the server acknowledges SHUTDOWN
    now_ = start_ + absl::Seconds(s);
    Send(From(proto::SERVER, 0, proto::HEARTBEAT), "s0");
    core_->OnTick(now_);
  }
  ASSERT_EQ(requester_.sent.size(), 1u);
  Message ack;
  ack.header.set_is_reply(true);
  requester_.sent[0].callback(std::move(ack));
  EXPECT_TRUE(core_->done().HasBeenNotified());
  EXPECT_NE(core_->failure().find("none finished"), std::string::npos) << core_->failure();
}

TEST_F(SchedulerCoreTest, JobEndsWhenWorkersFinishAndServersAcknowledge) {
  RegisterAll();
  Message finish = From(proto::WORKER, 0, proto::FINISH);
  finish.header.mutable_counters()->set_iterations(5);
  Send(std::move(finish), "w0");
  EXPECT_TRUE(requester_.sent.empty());
  Send(From(proto::WORKER, 1, proto::FINISH), "w1");
  ASSERT_EQ(requester_.sent.size(), 1u);
  EXPECT_EQ(requester_.sent[0].peer, "tcp://127.0.0.1:1/s0");
  EXPECT_EQ(requester_.sent[0].request.header.type(), proto::SHUTDOWN);
  EXPECT_FALSE(core_->done().HasBeenNotified());
  Message ack;
  ack.header.set_is_reply(true);
  ack.header.mutable_counters()->set_pushes(42);
  requester_.sent[0].callback(std::move(ack));
  EXPECT_TRUE(core_->done().HasBeenNotified());
  EXPECT_TRUE(core_->failure().empty());
  const std::string report = core_->ReportJson();
  absl::StatusOr<testing::Json> json = testing::ParseJson(report);
  ASSERT_TRUE(json.ok()) << json.status() << "\n" << report;
  EXPECT_EQ((*json)["servers"][0]["pushes"].number, 42) << report;
  EXPECT_EQ((*json)["workers"][0]["iterations"].number, 5) << report;
  EXPECT_EQ((*json)["workers"][1]["iterations"].number, 0) << report;
}

TEST_F(SchedulerCoreTest, FailsWhenRegistrationNeverCompletes) {
  Register(proto::WORKER, "w0");
  now_ = start_ + options_.register_timeout + absl::Seconds(1);
  core_->OnTick(now_);
  EXPECT_TRUE(core_->done().HasBeenNotified());
  EXPECT_FALSE(core_->failure().empty());
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].second.header.code(), proto::FAILED_PRECONDITION);
}

TEST_F(SchedulerCoreTest, WorkerJoinsARunningR2spJobOnceServersKnow) {
  options_.sync = proto::R2SP;
  core_ = std::make_unique<SchedulerCore>(options_, &requester_, [this] { return now_; });
  RegisterAll();
  Barrier(proto::WORKER, 0, proto::WORKERS, 0);
  Barrier(proto::WORKER, 1, proto::WORKERS, 0);
  ASSERT_EQ(sink_.Take().size(), 2u);
  Register(proto::WORKER, "w2");
  EXPECT_TRUE(sink_.Take().empty());  // parked until the server acknowledges
  ASSERT_EQ(requester_.sent.size(), 1u);
  EXPECT_EQ(requester_.sent[0].request.header.type(), proto::MEMBERSHIP);
  EXPECT_EQ(requester_.sent[0].request.header.membership().num_workers(), 3);
  Message ack;
  ack.header.set_is_reply(true);
  requester_.sent[0].callback(std::move(ack));
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 1u);
  const proto::RegisterReply r = RegisterReplyOf(replies[0].second).value();
  EXPECT_EQ(r.rank(), 2);
  EXPECT_TRUE(r.joined_running_job());
  EXPECT_EQ(r.book().workers_size(), 3);
  EXPECT_EQ(r.next_workers_barrier(), 1u);
  // It is in the ring: after 0 and 1 it gets its slot.
  for (int w : {0, 1, 2}) {
    now_ += absl::Milliseconds(100);  // past the slot gap
    Message slot = From(proto::WORKER, w, proto::SLOT);
    slot.header.mutable_report()->set_compute_seconds(0.001);
    Send(std::move(slot), "w" + std::to_string(w));
    ASSERT_EQ(sink_.Take().size(), 1u) << "worker " << w;
    Send(From(proto::WORKER, w, proto::RELEASE), "w" + std::to_string(w));
    ASSERT_EQ(sink_.Take().size(), 1u);
  }
}

// A joiner takes over a dead worker's data shard, never a live one's. Two replacements that
// want shards register before worker 1's death is detected: the first waits for it and gets
// shard 1 of 2; the second finds no free shard and, after three heartbeat timeouts, joins
// without one (-1: a worker with a data set then stops with a clear error). A third finds as
// many waiting as the job has workers and is turned away.
TEST_F(SchedulerCoreTest, JoinerTakesOverADeadWorkersDataShard) {
  options_.sync = proto::ASP;
  core_ = std::make_unique<SchedulerCore>(options_, &requester_, [this] { return now_; });
  RegisterAll();
  for (const char* id : {"w2", "w3", "w4"}) RegisterJoiner(id);
  EXPECT_TRUE(requester_.sent.empty());  // two wait
  // No more than the job's worker count may wait (a flood of joiners, with auth off).
  auto refused = sink_.Take();
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].first, "w4");
  EXPECT_EQ(refused[0].second.header.code(), proto::FAILED_PRECONDITION);
  std::vector<std::pair<std::string, Message>> joined;
  for (int s = 1; s <= 14; ++s) {  // worker 1 falls silent: dead after 3 s
    BeatAndTick(s);
    for (auto& r : sink_.Take()) {
      if (r.second.header.has_register_reply()) joined.push_back(std::move(r));
    }
    if (s == 4) ASSERT_EQ(joined.size(), 1u);
    if (s == 8) ASSERT_EQ(joined.size(), 1u);
    if (!joined.empty()) Send(From(proto::WORKER, 2, proto::HEARTBEAT), "w2");  // it trains
  }
  ASSERT_EQ(joined.size(), 2u);
  EXPECT_EQ(joined[0].first, "w2");
  EXPECT_EQ(joined[0].second.header.register_reply().data_shard(), 1);
  EXPECT_EQ(joined[0].second.header.register_reply().data_world(), 2);
  EXPECT_EQ(joined[1].second.header.register_reply().data_shard(), -1);
}

// With --absorb_orphaned_shards the first worker to ask fixes an epoch's plan from the shards
// of the live workers; a dead worker's shard is dealt out from the next epoch on, the plans are
// saved each time one is fixed, and a joiner can no longer take that shard.
TEST_F(SchedulerCoreTest, DeadWorkersShardIsDealtOutFromTheNextEpoch) {
  options_.sync = proto::ASP;
  options_.absorb_orphaned_shards = true;
  std::vector<proto::EpochPlans> saved;
  options_.save_epoch_plans = [&saved](const proto::EpochPlans& p) { saved.push_back(p); };
  core_ = std::make_unique<SchedulerCore>(options_, &requester_, [this] { return now_; });
  Register(proto::SERVER, "s0");
  Register(proto::WORKER, "w0");
  Register(proto::WORKER, "w1");
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_TRUE(RegisterReplyOf(replies[1].second).value().book().absorb_orphaned_shards());
  auto plan = [this](int epoch, bool starting) {
    Message m = From(proto::WORKER, 0, proto::EPOCH_PLAN);
    m.header.mutable_epoch_plan_request()->set_epoch(epoch);
    m.header.mutable_epoch_plan_request()->set_starting(starting);
    Send(std::move(m), "w0");
    auto r = sink_.Take();
    EXPECT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].second.header.code(), proto::OK) << r[0].second.header.error();
    const auto& live = r[0].second.header.epoch_plan().live_shards();
    return std::vector<int>(live.begin(), live.end());
  };
  EXPECT_EQ(plan(0, true), (std::vector<int>{0, 1}));
  for (int s = 1; s <= 5; ++s) BeatAndTick(s);  // worker 1 falls silent: dead after 3 s
  sink_.Take();
  EXPECT_EQ(plan(0, false), (std::vector<int>{0, 1}));  // fixed: the dead one's part is lost
  EXPECT_EQ(plan(1, false), (std::vector<int>{0}));     // dealt out to worker 0
  ASSERT_EQ(saved.size(), 2u);
  EXPECT_EQ(saved[1].plans_size(), 2);
  EXPECT_EQ(saved[1].data_world(), 2);
  // A replacement arriving now finds no free shard: it joins without one (and a real model
  // then stops with a clear error rather than train worker 0's data twice).
  RegisterJoiner("w2");
  int shard = -2;
  for (int s = 6; s <= 20 && shard == -2; ++s) {
    BeatAndTick(s);
    for (auto& r : sink_.Take()) {
      if (r.second.header.has_register_reply()) {
        shard = r.second.header.register_reply().data_shard();
      }
    }
  }
  EXPECT_EQ(shard, -1);
  // Asking for an epoch past the next one, or without the flag, is refused.
  Message ahead = From(proto::WORKER, 0, proto::EPOCH_PLAN);
  ahead.header.mutable_epoch_plan_request()->set_epoch(5);
  Send(std::move(ahead), "w0");
  auto refused = sink_.Take();
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].second.header.code(), proto::INVALID_ARGUMENT);
}

TEST_F(SchedulerCoreTest, EpochPlansNeedTheFlag) {
  RegisterAll();
  Message m = From(proto::WORKER, 0, proto::EPOCH_PLAN);
  Send(std::move(m), "w0");
  auto refused = sink_.Take();
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].second.header.code(), proto::FAILED_PRECONDITION);
}

TEST_F(SchedulerCoreTest, LeavingWorkerNoLongerHoldsUpTheRing) {
  options_.sync = proto::R2SP;
  core_ = std::make_unique<SchedulerCore>(options_, &requester_, [this] { return now_; });
  RegisterAll();
  Send(From(proto::WORKER, 0, proto::SLOT), "w0");
  ASSERT_EQ(sink_.Take().size(), 1u);
  Message last = From(proto::WORKER, 0, proto::RELEASE);
  last.header.mutable_report()->set_leaving(true);  // worker 0 is done
  Send(std::move(last), "w0");
  ASSERT_EQ(sink_.Take().size(), 1u);
  for (int round = 0; round < 2; ++round) {  // worker 1 alone in the ring now
    now_ += absl::Seconds(1);
    Send(From(proto::WORKER, 1, proto::SLOT), "w1");
    ASSERT_EQ(sink_.Take().size(), 1u) << "round " << round;
    Send(From(proto::WORKER, 1, proto::RELEASE), "w1");
    ASSERT_EQ(sink_.Take().size(), 1u);
  }
}

// bsp and ssp joiners join at a clock boundary: every live server is asked to prepare, the
// largest first clock they answer is the join clock, the MEMBERSHIP adding the worker carries
// it, and so does the joiner's reply. A second joiner waits until the first is in.
TEST_F(SchedulerCoreTest, BspJoinerJoinsAtTheClockTheServersAgreeOn) {
  options_.sync = proto::BSP;
  options_.num_servers = 2;
  core_ = std::make_unique<SchedulerCore>(options_, &requester_, [this] { return now_; });
  for (const char* s : {"s0", "s1"}) Register(proto::SERVER, s);
  for (const char* w : {"w0", "w1"}) Register(proto::WORKER, w);
  ASSERT_EQ(sink_.Take().size(), 4u);
  Register(proto::WORKER, "w2");
  Register(proto::WORKER, "w3");  // waits for w2's join
  EXPECT_TRUE(sink_.Take().empty());
  ASSERT_EQ(requester_.sent.size(), 2u);
  int64_t first = 5;
  for (auto& sent : requester_.sent) {
    EXPECT_TRUE(sent.request.header.membership().prepare());
    Message answer;
    answer.header.set_is_reply(true);
    answer.header.set_clock(first);
    first += 2;
    sent.callback(std::move(answer));
  }
  ASSERT_EQ(requester_.sent.size(), 4u);  // the commits
  for (size_t i = 2; i < 4; ++i) {
    const proto::Membership& m = requester_.sent[i].request.header.membership();
    EXPECT_FALSE(m.prepare());
    EXPECT_EQ(m.join_clock(), 7);
    EXPECT_EQ(m.num_workers(), 3);
    EXPECT_EQ(m.worker_ids(2), "w2");
  }
  EXPECT_TRUE(sink_.Take().empty());
  for (size_t i = 2; i < 4; ++i) {
    Message ack;
    ack.header.set_is_reply(true);
    requester_.sent[i].callback(std::move(ack));
  }
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].first, "w2");
  EXPECT_EQ(replies[0].second.header.register_reply().rank(), 2);
  EXPECT_EQ(replies[0].second.header.register_reply().join_clock(), 7);
  EXPECT_TRUE(replies[0].second.header.register_reply().joined_running_job());
  core_->OnTick(now_);  // w3's turn
  ASSERT_EQ(requester_.sent.size(), 6u);
  EXPECT_TRUE(requester_.sent[4].request.header.membership().prepare());
}

// A server that cannot prepare (an error, or a malformed answer) cancels the join: the holds
// are released, the joiner is told to register again, and its rank is the next joiner's.
TEST_F(SchedulerCoreTest, ARefusedPrepareCancelsTheJoin) {
  options_.sync = proto::SSP;
  core_ = std::make_unique<SchedulerCore>(options_, &requester_, [this] { return now_; });
  RegisterAll();
  for (int attempt = 0; attempt < 2; ++attempt) {
    Register(proto::WORKER, "w2");
    ASSERT_EQ(requester_.sent.size(), 1u);
    Message answer;
    answer.header.set_is_reply(true);
    if (attempt == 0) {
      answer.header.set_code(proto::FAILED_PRECONDITION);
    } else {
      answer.header.set_clock(-3);
    }
    requester_.sent[0].callback(std::move(answer));
    ASSERT_EQ(requester_.sent.size(), 2u);
    EXPECT_TRUE(requester_.sent[1].request.header.membership().cancel());
    requester_.sent.clear();
    auto replies = sink_.Take();
    ASSERT_EQ(replies.size(), 1u);
    EXPECT_EQ(replies[0].second.header.code(), proto::NOT_READY);
  }
  Register(proto::WORKER, "w2");
  Message answer;
  answer.header.set_is_reply(true);
  answer.header.set_clock(4);
  requester_.sent[0].callback(std::move(answer));
  EXPECT_EQ(requester_.sent[1].request.header.membership().num_workers(), 3);
  EXPECT_EQ(requester_.sent[1].request.header.membership().join_clock(), 4);
}

TEST_F(SchedulerCoreTest, RejectsUnknownSenders) {
  Send(From(proto::WORKER, 0, proto::HEARTBEAT), "early");  // before registration
  EXPECT_EQ(sink_.Take()[0].second.header.code(), proto::NOT_READY);
  RegisterAll();
  Send(From(proto::WORKER, 9, proto::HEARTBEAT), "x");
  EXPECT_EQ(sink_.Take()[0].second.header.code(), proto::INVALID_ARGUMENT);
  Send(From(proto::WORKER, 0, proto::PUSH), "w0");
  EXPECT_EQ(sink_.Take()[0].second.header.code(), proto::INVALID_ARGUMENT);
}

// Found by the scheduler_core fuzz target (ASan: heap-buffer-overflow): a worker joining a
// hetero-batching job is in the report's worker list before the batch tuner has it (the
// servers have not acknowledged it yet); the report showed a batch past the tuner's end.
TEST_F(SchedulerCoreTest, ReportWhileAJoinerWaitsForTheServers) {
  StartHeteroJobWithAJoinerWaiting();
  const std::string report = core_->ReportJson();
  absl::StatusOr<testing::Json> json = testing::ParseJson(report);
  ASSERT_TRUE(json.ok()) << json.status() << "\n" << report;
  const testing::Json& rows = (*json)["batching"]["workers"];
  ASSERT_EQ(rows.array.size(), 2u) << report;  // not the joiner, worker 2
  EXPECT_EQ(rows[1]["worker"].number, 1) << report;
  EXPECT_EQ(rows[1]["batch"].number, 32) << report;
}

// Found by the scheduler_core fuzz target (ASan: heap-buffer-overflow in BatchTuner::Report):
// a joiner sending before its REGISTER reply (before the servers acknowledged it) reached the
// batch tuner, which does not have it yet. A worker still joining is not a member: every
// request from it but a heartbeat is refused until the reply, and nothing changes.
TEST_F(SchedulerCoreTest, AJoinerIsNoMemberUntilTheServersKnowIt) {
  StartHeteroJobWithAJoinerWaiting();
  for (proto::MsgType type : {proto::REPORT, proto::SLOT, proto::RELEASE, proto::FINISH,
                              proto::BARRIER}) {
    Message m = From(proto::WORKER, 2, type);
    m.header.mutable_report()->set_samples(32);
    m.header.mutable_report()->set_compute_seconds(0.1);
    if (type == proto::BARRIER) m.header.mutable_barrier()->set_group(proto::WORKERS);
    Send(std::move(m), "w2");
    auto replies = sink_.Take();
    ASSERT_EQ(replies.size(), 1u) << proto::MsgType_Name(type);
    EXPECT_EQ(replies[0].second.header.code(), proto::FAILED_PRECONDITION)
        << proto::MsgType_Name(type);
    EXPECT_NE(replies[0].second.header.error().find("still joining"), std::string::npos);
  }
  const std::string report = core_->ReportJson();
  EXPECT_EQ(report.find("\"state\": \"finished\""), std::string::npos) << report;
}

// A joiner is silent until its REGISTER reply: however long the servers take to answer, it is
// not declared dead meanwhile (its data shard would be orphaned twice, were the join cancelled).
TEST_F(SchedulerCoreTest, AJoinerWaitingForTheServersIsNotDeclaredDead) {
  options_.sync = proto::BSP;
  core_ = std::make_unique<SchedulerCore>(options_, &requester_, [this] { return now_; });
  RegisterAll();
  Register(proto::WORKER, "w2");
  ASSERT_EQ(requester_.sent.size(), 1u);
  for (int s = 1; s <= 10; ++s) {
    now_ = start_ + absl::Seconds(s);
    for (const char* who : {"s0", "w0", "w1"}) {
      Send(From(who[0] == 's' ? proto::SERVER : proto::WORKER, who[1] - '0', proto::HEARTBEAT),
           who);
    }
    core_->OnTick(now_);
  }
  sink_.Take();
  Message answer;
  answer.header.set_is_reply(true);
  answer.header.set_clock(3);
  requester_.sent[0].callback(std::move(answer));
  Message ack;
  ack.header.set_is_reply(true);
  requester_.sent[1].callback(std::move(ack));
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].second.header.register_reply().join_clock(), 3);
  EXPECT_EQ(core_->ReportJson().find("\"state\": \"dead\""), std::string::npos)
      << core_->ReportJson();
}

// The sender is the connection, not the header: a request claiming a registered node's role and
// rank over any other connection is denied and changes nothing, with authentication off.
TEST_F(SchedulerCoreTest, HeadersClaimingAnotherNodeAreDenied) {
  options_.sync = proto::R2SP;
  core_ = std::make_unique<SchedulerCore>(options_, &requester_, [this] { return now_; });
  RegisterAll();
  Send(From(proto::WORKER, 0, proto::FINISH), "stranger");
  Send(From(proto::WORKER, 0, proto::FINISH), "w1");  // another worker's connection
  Send(From(proto::SERVER, 0, proto::HEARTBEAT), "w0");
  Send(From(proto::WORKER, 1, proto::SLOT), "w0");
  Barrier(proto::WORKER, 0, proto::WORKERS, 0);
  Message barrier = From(proto::WORKER, 1, proto::BARRIER);
  barrier.header.mutable_barrier()->set_group(proto::WORKERS);
  Send(std::move(barrier), "stranger");  // would complete the barrier
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 5u);
  for (const auto& [to, reply] : replies) {
    EXPECT_EQ(reply.header.code(), proto::PERMISSION_DENIED) << to;
  }
  absl::StatusOr<testing::Json> json = testing::ParseJson(core_->ReportJson());
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ((*json)["denied_requests"].number, 5);
  EXPECT_EQ(core_->ReportJson().find("\"state\": \"finished\""), std::string::npos);
  // A registration repeated over another connection cannot take the node's place either.
  Register(proto::WORKER, "w0");
  EXPECT_EQ(sink_.Take()[0].second.header.code(), proto::FAILED_PRECONDITION);
}

// With authentication, a peer's key decides its role: a worker's key registers no server, and
// a worker cannot send as one.
TEST_F(SchedulerCoreTest, AuthenticatedRoleMustMatchTheClaim) {
  Message reg;
  reg.header.set_type(proto::REGISTER);
  reg.header.mutable_register_request()->set_role(proto::SERVER);
  reg.header.mutable_register_request()->set_endpoint("tcp://127.0.0.1:1/s");
  reg.header.mutable_register_request()->set_instance_id("s");
  Responder as_worker(&sink_, "s", reg.header, proto::WORKER);
  core_->HandleRequest(std::move(reg), std::move(as_worker));
  EXPECT_EQ(sink_.Take()[0].second.header.code(), proto::PERMISSION_DENIED);
  RegisterAll();
  Message beat = From(proto::SERVER, 0, proto::HEARTBEAT);
  Responder worker_key(&sink_, "s0", beat.header, proto::WORKER);
  core_->HandleRequest(std::move(beat), std::move(worker_key));
  EXPECT_EQ(sink_.Take()[0].second.header.code(), proto::PERMISSION_DENIED);
}

// Hetero batching through REPORT: the iterations each worker has left reach the tuner, and the
// worker that is behind (more left) gets the smaller batch (figures as in batch_tuner_test's
// AWorkerBehindGetsShorterIterationsToFinishWithTheOthers).
TEST_F(SchedulerCoreTest, ReportsCarryIterationsLeftToTheTuner) {
  options_.sync = proto::ASP;
  options_.slots.hetero_batching = true;
  options_.slots.batching.global_batch = 200;
  options_.slots.batching.hysteresis = 0.0;
  options_.slots.batching.reports_between_changes = 1;
  core_ = std::make_unique<SchedulerCore>(options_, &requester_, [this] { return now_; });
  RegisterAll();
  int batch[2] = {100, 100};
  for (int round = 0; round < 20; ++round) {
    for (int rank = 0; rank < 2; ++rank) {
      Message m = From(proto::WORKER, rank, proto::REPORT);
      proto::IterationReport* r = m.header.mutable_report();
      r->set_samples(batch[rank]);
      r->set_compute_seconds(batch[rank] / 1000.0);
      r->set_comm_seconds(0.010);
      r->set_iterations_left(rank == 0 ? 150 : 100);
      Send(std::move(m), "w" + std::to_string(rank));
      auto replies = sink_.Take();
      ASSERT_EQ(replies.size(), 1u);
      batch[rank] = replies[0].second.header.batch().batch_size();
    }
  }
  EXPECT_EQ(batch[0], 84);
  EXPECT_EQ(batch[1], 116);
}


// Server replacement (--server_replace_s). Servers fall silent from t = 0; workers heartbeat
// each second with a progress count that stands still, as it would while they wait.
class ServerReplacementTest : public SchedulerCoreTest {
 protected:
  void SetUp() override {
    options_.server_replace_timeout = absl::Seconds(30);
    options_.progress_timeout = absl::Seconds(5);  // past the server's loss (4 s)
    Restart();
  }
  void Restart() {
    core_ = std::make_unique<SchedulerCore>(options_, &requester_, [this] { return now_; });
    RegisterAll();
  }
  // Advances to t = `seconds` (from t = 0) with both workers heartbeating; the last reply.
  proto::HeartbeatReply HeartbeatUntil(int seconds) {
    for (int s = static_cast<int>((now_ - start_) / absl::Seconds(1)) + 1; s <= seconds; ++s) {
      now_ = start_ + absl::Seconds(s);
      Send(From(proto::WORKER, 0, proto::HEARTBEAT), "w0");
      Send(From(proto::WORKER, 1, proto::HEARTBEAT), "w1");
      core_->OnTick(now_);
    }
    std::vector<std::pair<std::string, Message>> replies = sink_.Take();
    return replies.empty() ? proto::HeartbeatReply() : replies.back().second.header.heartbeat_reply();
  }
};

TEST_F(ServerReplacementTest, LostServerIsAwaitedReplacedAndTheWorkersToldWhere) {
  proto::HeartbeatReply beat = HeartbeatUntil(5);
  EXPECT_FALSE(core_->done().HasBeenNotified()) << core_->failure();
  ASSERT_EQ(beat.replacing_servers_size(), 1);
  EXPECT_EQ(beat.replacing_servers(0), 0);
  EXPECT_EQ(beat.dead_servers_size(), 0);
  EXPECT_EQ(beat.dead_workers_size(), 0);  // no progress, but they wait for the server
  EXPECT_EQ(beat.servers_size(), 0);       // nothing replaced yet
  // The connection to the lost server is closed, not kept for ever.
  EXPECT_EQ(requester_.resets, std::vector<std::string>{"tcp://127.0.0.1:1/s0"});

  Register(proto::SERVER, "s0b");
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 1u);
  const proto::RegisterReply r = RegisterReplyOf(replies[0].second).value();
  EXPECT_EQ(r.rank(), 0);
  EXPECT_TRUE(r.joined_running_job());
  ASSERT_EQ(r.book().workers_size(), 2);
  EXPECT_EQ(r.book().workers(1).routing_id(), "w1");  // it takes pushes from their connections
  EXPECT_EQ(r.book().server_replace_ms(), 30000);

  beat = HeartbeatUntil(6);
  EXPECT_EQ(beat.replacing_servers_size(), 0);
  ASSERT_EQ(beat.servers_size(), 1);
  EXPECT_EQ(beat.servers(0).endpoint(), "tcp://127.0.0.1:1/s0b");
  EXPECT_EQ(beat.servers(0).incarnation(), 1);
  // The replacement is the rank's node now; the old one's connection is not.
  Send(From(proto::SERVER, 0, proto::HEARTBEAT), "s0b");
  EXPECT_EQ(sink_.Take()[0].second.header.code(), proto::OK);
  Send(From(proto::SERVER, 0, proto::HEARTBEAT), "s0");
  EXPECT_EQ(sink_.Take()[0].second.header.code(), proto::PERMISSION_DENIED);
  EXPECT_FALSE(core_->done().HasBeenNotified());
}

TEST_F(ServerReplacementTest, ReplacementRegisteringBeforeTheLossIsDetectedWaitsForIt) {
  now_ = start_ + absl::Seconds(1);
  Register(proto::SERVER, "s0b");  // its predecessor just died; the scheduler does not know yet
  EXPECT_TRUE(sink_.Take().empty());
  HeartbeatUntil(5);  // declared lost after 3 s of silence: the waiting server takes its rank
  Send(From(proto::SERVER, 0, proto::HEARTBEAT), "s0b");
  EXPECT_EQ(sink_.Take()[0].second.header.code(), proto::OK);
}

TEST_F(ServerReplacementTest, NoReplacementInTimeFailsTheJob) {
  options_.server_replace_timeout = absl::Seconds(5);
  Restart();
  HeartbeatUntil(8);  // lost at 4 s, awaited until 9 s; the workers' stall is not held against them
  EXPECT_FALSE(core_->done().HasBeenNotified()) << core_->failure();
  HeartbeatUntil(10);
  EXPECT_TRUE(core_->done().HasBeenNotified());
  EXPECT_NE(core_->failure().find("no replacement registered"), std::string::npos)
      << core_->failure();
  Register(proto::SERVER, "late");
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_NE(replies[0].second.header.code(), proto::OK);
}

TEST_F(ServerReplacementTest, AServerJoiningWhenNoneWasLostIsTurnedAwayAfterItsWait) {
  Register(proto::SERVER, "extra");
  EXPECT_TRUE(sink_.Take().empty());
  Register(proto::SERVER, "flood");  // more than the job's one server may not wait
  auto flood = sink_.Take();
  ASSERT_EQ(flood.size(), 1u);
  EXPECT_NE(flood[0].second.header.error().find("wait to replace lost ones already"),
            std::string::npos);
  for (int s = 1; s <= 10; ++s) {  // everyone alive throughout
    now_ = start_ + absl::Seconds(s);
    Send(From(proto::SERVER, 0, proto::HEARTBEAT), "s0");
    Send(From(proto::WORKER, 0, proto::HEARTBEAT), "w0");
    Send(From(proto::WORKER, 1, proto::HEARTBEAT), "w1");
    core_->OnTick(now_);
  }
  bool refused = false;
  for (auto& [to, m] : sink_.Take()) {
    if (to == "extra") refused = m.header.code() == proto::FAILED_PRECONDITION;
  }
  EXPECT_TRUE(refused);
}

TEST_F(ServerReplacementTest, BspJobsDoNotReplaceServers) {
  options_.sync = proto::BSP;
  Restart();
  HeartbeatUntil(5);
  EXPECT_TRUE(core_->done().HasBeenNotified());
  EXPECT_NE(core_->failure().find("bsp jobs do not replace servers"), std::string::npos)
      << core_->failure();
}

// A node's heartbeat period must let two beats fit in the timeout (CheckHeartbeatPeriod): a
// slower one is refused at registration, naming both values; the others are told the timeout
// in the address book.
TEST_F(SchedulerCoreTest, ANodeWhoseHeartbeatsAreTooSlowIsRefused) {
  Message m;
  m.header.set_type(proto::REGISTER);
  auto* reg = m.header.mutable_register_request();
  reg->set_role(proto::SERVER);
  reg->set_endpoint("tcp://127.0.0.1:1/slow");
  reg->set_instance_id("slow");
  reg->set_heartbeat_period_ms(1501);  // the timeout is 3 s
  Send(std::move(m), "slow");
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].second.header.code(), proto::INVALID_ARGUMENT);
  EXPECT_EQ(replies[0].second.header.error(),
            "this node's heartbeat period (--heartbeat_ms=1501) cannot meet the scheduler's "
            "heartbeat timeout (--heartbeat_timeout_ms=3000): two heartbeats must fit in the "
            "timeout (heartbeat_ms * 2 <= heartbeat_timeout_ms), or the node is declared dead "
            "between two of them");
  RegisterAll();  // the refused node took no place in the job
}

TEST_F(SchedulerCoreTest, TheAddressBookCarriesTheHeartbeatTimeout) {
  Register(proto::SERVER, "s0");
  Register(proto::WORKER, "w0");
  Register(proto::WORKER, "w1");
  auto replies = sink_.Take();
  ASSERT_EQ(replies.size(), 3u);
  for (const auto& [who, reply] : replies) {
    EXPECT_EQ(RegisterReplyOf(reply).value().book().heartbeat_timeout_ms(), 3000) << who;
  }
}

}  // namespace
}  // namespace r2sp
