// Security with the real binaries on 127.0.0.1. With --auth=curve, a plain ZeroMQ
// peer and a CURVE peer holding another job's key get no answer to any message type, and the
// job they aim at completes, in every mode; a secret key file others may read stops a binary.
// With auth off, headers claiming the scheduler or another worker are denied and change nothing.
// A peer flooding a server with pushes it never reads the answers to leaves the server's memory
// bounded and the job completes.
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/auth/curve_keys.h"
#include "common/transport.h"
#include "gtest/gtest.h"
#include "tests/testing/local_job.h"
#include "zmq.hpp"

namespace r2sp {
namespace {

using testing::JobSpec;
using testing::LocalJob;

constexpr proto::MsgType kEveryType[] = {
    proto::REGISTER, proto::HEARTBEAT, proto::BARRIER, proto::FINISH,  proto::SHUTDOWN,
    proto::PUSH,     proto::PULL,      proto::SLOT,    proto::RELEASE, proto::REPORT,
    proto::MEMBERSHIP};

JobSpec SyntheticJob(const std::string& name, const std::string& sync, int iterations) {
  JobSpec spec;
  spec.name = name;
  spec.servers = 2;
  spec.workers = 2;
  spec.scheduler_flags = {"--sync=" + sync, "--partition_bytes=65536"};
  spec.worker_flags = {"--model_mb=1", "--layers=4", "--compute_ms=20",
                       absl::StrCat("--iterations=", iterations)};
  return spec;
}

void AddAuth(JobSpec& spec, const std::string& keys) {
  for (auto* flags : {&spec.scheduler_flags, &spec.server_flags, &spec.worker_flags}) {
    flags->push_back("--auth=curve");
    flags->push_back("--keys_dir=" + keys);
  }
}

// Whether every process exited 0. The waits share one 90 s budget for the workers (the jobs
// take seconds), so a hung job fails here with every log rather than at Bazel's timeout.
bool Completed(LocalJob& job, int servers, int workers) {
  bool ok = true;
  const absl::Time deadline = absl::Now() + absl::Seconds(90);
  for (int w = 0; w < workers; ++w) {
    const absl::Duration left = std::max(deadline - absl::Now(), absl::Seconds(1));
    const int status = job.worker(w).Wait(left).value_or(-1);
    EXPECT_EQ(status, 0) << job.worker(w).Log();
    ok &= status == 0;
  }
  for (int s = 0; s < servers; ++s) {
    const int status = job.server(s).Wait(absl::Seconds(30)).value_or(-1);
    EXPECT_EQ(status, 0) << job.server(s).Log();
    ok &= status == 0;
  }
  const int status = job.scheduler().Wait(absl::Seconds(30)).value_or(-1);
  EXPECT_EQ(status, 0) << job.scheduler().Log();
  return ok && status == 0;
}

// The servers' endpoints, from the scheduler's log, once `n` have registered.
std::vector<std::string> ServerEndpoints(LocalJob& job, int n) {
  const std::regex registered("server registered from (tcp://[0-9.:]+)");
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  std::vector<std::string> found;
  while (absl::Now() < deadline) {
    found.clear();
    const std::string log = job.scheduler().Log();
    for (std::sregex_iterator it(log.begin(), log.end(), registered), end; it != end; ++it) {
      found.push_back((*it)[1]);
    }
    if (static_cast<int>(found.size()) >= n) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return found;
}

// One request of every type, claiming to be worker 0 (the scheduler for SHUTDOWN and
// MEMBERSHIP), to each endpoint; returns how many were answered at all.
int AnswersToEveryType(Transport& from, const std::vector<std::string>& endpoints) {
  struct Counts {
    int answered = 0, done = 0, sent = 0;
  } counts;
  absl::Mutex mu;
  for (const std::string& endpoint : endpoints) {
    for (proto::MsgType type : kEveryType) {
      Message m;
      m.header.set_type(type);
      const bool scheduler_only = type == proto::SHUTDOWN || type == proto::MEMBERSHIP;
      m.header.set_sender_role(scheduler_only ? proto::SCHEDULER : proto::WORKER);
      m.header.set_sender_rank(0);
      if (type == proto::REGISTER) {
        m.header.mutable_register_request()->set_role(proto::WORKER);
        m.header.mutable_register_request()->set_endpoint("tcp://127.0.0.1:1");
        m.header.mutable_register_request()->set_instance_id("intruder");
      }
      if (type == proto::BARRIER) m.header.mutable_barrier()->set_group(proto::WORKERS);
      if (type == proto::PUSH) {
        std::vector<float> poison(16, 1e9f);
        m.payload.push_back(zmq::message_t(poison.data(), poison.size() * sizeof(float)));
      }
      {
        absl::MutexLock lock(&mu);
        ++counts.sent;
      }
      from.Request(endpoint, std::move(m), absl::Seconds(2), [&](absl::StatusOr<Message> r) {
        absl::MutexLock lock(&mu);
        counts.answered += r.ok();
        ++counts.done;
      });
    }
  }
  absl::MutexLock lock(&mu);
  mu.Await(absl::Condition(+[](Counts* c) { return c->done == c->sent; }, &counts));
  return counts.answered;
}

class SecurityTest : public ::testing::TestWithParam<const char*> {};

TEST_P(SecurityTest, CurveJobCompletesAndStrangersGetNoAnswer) {
  const std::string mode = GetParam();
  const std::string keys = testing::MakeTempDir("keys-" + mode) + "/keys";
  ASSERT_TRUE(WriteJobKeys(keys, false).ok());
  JobSpec spec = SyntheticJob("curve-" + mode, mode, 120);
  AddAuth(spec, keys);
  LocalJob job(spec);
  std::vector<std::string> targets = ServerEndpoints(job, 2);
  ASSERT_EQ(targets.size(), 2u) << job.scheduler().Log();
  targets.push_back(job.endpoint());

  // A plain (NULL mechanism) peer.
  auto plain = Transport::Create(TransportOptions());
  ASSERT_TRUE(plain.ok());
  (*plain)->Start(nullptr);
  EXPECT_EQ(AnswersToEveryType(**plain, targets), 0);
  // A CURVE peer that knows the job's public keys but holds another job's worker key.
  absl::StatusOr<JobKeys> real = LoadJobKeys(keys, proto::WORKER);
  auto other = GenerateJobKeys();
  ASSERT_TRUE(real.ok() && other.ok());
  JobKeys impostor = (*other)[proto::WORKER];
  impostor.public_keys = real->public_keys;
  TransportOptions options;
  options.curve = std::make_shared<const JobKeys>(impostor);
  auto intruder = Transport::Create(options);
  ASSERT_TRUE(intruder.ok());
  (*intruder)->Start(nullptr);
  for (size_t i = 0; i < targets.size(); ++i) {
    (*intruder)->ExpectPeer(targets[i], i + 1 < targets.size() ? proto::SERVER : proto::SCHEDULER);
  }
  EXPECT_EQ(AnswersToEveryType(**intruder, targets), 0);

  EXPECT_TRUE(Completed(job, 2, 2));
  EXPECT_NE(job.Stats().find("\"state\": \"finished\""), std::string::npos);
  // Keys never reach a log.
  for (const char* role : {"scheduler", "server", "worker"}) {
    std::string secret;
    std::ifstream(keys + "/" + role + ".key") >> secret;
    EXPECT_EQ(job.scheduler().Log().find(secret), std::string::npos);
    EXPECT_EQ(job.server(0).Log().find(secret), std::string::npos);
    EXPECT_EQ(job.worker(0).Log().find(secret), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryMode, SecurityTest,
                         ::testing::Values("bsp", "ssp", "asp", "r2sp"));

TEST(SecurityKeysTest, BinariesRefuseASecretKeyOthersMayRead) {
  const std::string keys = testing::MakeTempDir("keys-0644") + "/keys";
  ASSERT_TRUE(WriteJobKeys(keys, false).ok());
  ASSERT_EQ(chmod((keys + "/worker.key").c_str(), 0644), 0);
  const std::string dir = testing::MakeTempDir("refuse");
  testing::ChildProcess worker({"worker/worker", "--auth=curve", "--keys_dir=" + keys,
                                "--scheduler=tcp://127.0.0.1:1", "--iterations=1"},
                               dir + "/worker.log");
  EXPECT_NE(worker.Wait(absl::Seconds(20)), 0);
  EXPECT_NE(worker.Log().find("worker.key has mode 0644"), std::string::npos) << worker.Log();
  testing::ChildProcess scheduler({"scheduler/scheduler", "--auth=curve",
                                   "--bind=tcp://127.0.0.1:*"},
                                  dir + "/scheduler.log");  // no --keys_dir
  EXPECT_NE(scheduler.Wait(absl::Seconds(20)), 0);
  EXPECT_NE(scheduler.Log().find("needs --keys_dir"), std::string::npos) << scheduler.Log();
}

// Auth off: the sender is the connection, so a header claiming the scheduler or worker 0 over
// another connection is denied, and the job completes as if nothing happened.
TEST(SecurityWithoutAuthTest, ClaimsOfAnotherIdentityAreDenied) {
  LocalJob job(SyntheticJob("claims", "asp", 120));
  std::vector<std::string> servers = ServerEndpoints(job, 2);
  ASSERT_EQ(servers.size(), 2u) << job.scheduler().Log();
  auto stranger = Transport::Create(TransportOptions());
  ASSERT_TRUE(stranger.ok());
  (*stranger)->Start(nullptr);
  for (const std::string& target : {servers[0], servers[1], job.endpoint()}) {
    for (proto::MsgType type : kEveryType) {
      if (type == proto::REGISTER) continue;  // without auth a stranger may join as a worker
      Message m;
      m.header.set_type(type);
      const bool scheduler_only = type == proto::SHUTDOWN || type == proto::MEMBERSHIP;
      m.header.set_sender_role(scheduler_only ? proto::SCHEDULER : proto::WORKER);
      m.header.set_sender_rank(0);
      if (type == proto::BARRIER) m.header.mutable_barrier()->set_group(proto::WORKERS);
      // A server answers NOT_READY until every node has registered and it serves.
      absl::StatusOr<Message> reply;
      for (int attempt = 0; attempt < 100; ++attempt) {
        reply = (*stranger)->Call(target, Message{m.header, {}}, absl::Seconds(10));
        if (!reply.ok() || reply->header.code() != proto::NOT_READY) break;
        absl::SleepFor(absl::Milliseconds(100));
      }
      ASSERT_TRUE(reply.ok()) << reply.status();
      EXPECT_NE(reply->header.code(), proto::OK) << proto::MsgType_Name(type) << " to " << target;
      const bool handled = !(target == job.endpoint() && (type == proto::PUSH ||
                                                          type == proto::PULL ||
                                                          scheduler_only)) &&
                           !(target != job.endpoint() && type != proto::PUSH &&
                             type != proto::PULL && !scheduler_only);
      if (handled) {
        EXPECT_EQ(reply->header.code(), proto::PERMISSION_DENIED)
            << proto::MsgType_Name(type) << " to " << target << ": " << reply->header.error();
      }
    }
  }
  EXPECT_TRUE(Completed(job, 2, 2));
}

int64_t RssKb(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    int64_t kb = 0;
    if (line.rfind("VmRSS:", 0) == 0 &&
        absl::SimpleAtoi(line.substr(6, line.size() - 6 - 3), &kb)) {
      return kb;
    }
  }
  return -1;
}

// One peer sends 256 KiB pushes as fast as it can and never reads an answer: the server's RSS
// stays bounded (per-connection queues, frame limits) and the other workers' job completes.
TEST(SecurityFloodTest, AFloodingPeerLeavesTheServerBoundedAndTheJobCompletes) {
  JobSpec spec = SyntheticJob("flood", "asp", 150);
  spec.servers = 1;
  LocalJob job(spec);
  std::vector<std::string> servers = ServerEndpoints(job, 1);
  ASSERT_EQ(servers.size(), 1u);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> sent{0};
  std::thread flooder([&] {
    zmq::context_t ctx;
    zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    dealer.set(zmq::sockopt::sndhwm, 0);
    dealer.connect(servers[0]);
    proto::Header header;
    header.set_type(proto::PUSH);
    header.set_sender_role(proto::WORKER);
    header.set_key(0);
    header.add_payload_bytes(256 << 10);
    const std::string head = header.SerializeAsString();
    const std::string body(256 << 10, '\x42');
    while (!stop.load()) {
      zmq::message_t h(head.data(), head.size()), b(body.data(), body.size());
      if (dealer.send(h, zmq::send_flags::sndmore | zmq::send_flags::dontwait) &&
          dealer.send(b, zmq::send_flags::none)) {
        ++sent;
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
  });
  int64_t max_rss = 0;
  auto running = [&job](int w) { return !job.worker(w).Wait(absl::ZeroDuration()).has_value(); };
  while (running(0) || running(1)) {
    max_rss = std::max(max_rss, RssKb(job.server(0).pid()));
    absl::SleepFor(absl::Milliseconds(50));
  }
  stop.store(true);
  flooder.join();
  EXPECT_TRUE(Completed(job, 1, 2));
  EXPECT_GT(sent.load(), 1000) << "the flood did not reach the server";
  // A 1 MB model: the server's own footprint is a few tens of MB. The flood may add its queue
  // (64 messages of 256 KiB) and the refusals it never reads, but nothing that grows with it.
  EXPECT_LT(max_rss, 200 * 1024) << "server RSS " << max_rss << " KiB after " << sent.load()
                                 << " flooded pushes";
  RecordProperty("flooded_pushes", static_cast<int>(sent.load()));
  RecordProperty("server_max_rss_kb", static_cast<int>(max_rss));
}

}  // namespace
}  // namespace r2sp
