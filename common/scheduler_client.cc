// See scheduler_client.h.
#include "common/scheduler_client.h"

#include <unistd.h>

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/book_frame.h"
#include "common/leave_request.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace r2sp {

std::string MakeInstanceId() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::random_device rd;
  return absl::StrCat(host, ":", getpid(), ":", rd());
}

SchedulerClient::SchedulerClient(Requester* requester, const SchedulerClientOptions& options)
    : requester_(requester), options_(options) {
  requester_->ExpectPeer(options_.scheduler, proto::SCHEDULER);
}

SchedulerClient::~SchedulerClient() { StopHeartbeats(); }

proto::Header SchedulerClient::NewHeader(proto::MsgType type) const {
  proto::Header header;
  header.set_type(type);
  header.set_sender_role(role_);
  header.set_sender_rank(rank_);
  return header;
}

absl::StatusOr<Message> SchedulerClient::CallScheduler(Message request,
                                                       absl::Duration timeout) {
  R2SP_ASSIGN_OR_RETURN(Message reply,
                        CallAndWait(*requester_, options_.scheduler, std::move(request), timeout));
  R2SP_RETURN_IF_ERROR(FromReplyHeader(reply.header));
  return reply;
}

absl::StatusOr<proto::RegisterReply> SchedulerClient::Register(
    proto::Role role, const std::vector<proto::TensorSpec>& model, bool wants_data_shard,
    int requested_rank) {
  if (options_.endpoint.empty()) {
    return absl::InvalidArgumentError("SchedulerClientOptions.endpoint is empty: other nodes "
                                      "could not reach this one");
  }
  role_ = role;
  Message request;
  request.header = NewHeader(proto::REGISTER);
  proto::RegisterRequest* reg = request.header.mutable_register_request();
  reg->set_role(role);
  reg->set_endpoint(options_.endpoint);
  reg->set_instance_id(MakeInstanceId());
  for (const proto::TensorSpec& t : model) *reg->add_model() = t;
  reg->set_wants_data_shard(wants_data_shard);
  if (requested_rank >= 0) reg->set_requested_rank(requested_rank);
  reg->set_heartbeat_period_ms(absl::ToInt64Milliseconds(options_.heartbeat_period));
  absl::StatusOr<Message> reply = CallScheduler(std::move(request), options_.register_timeout);
  if (absl::IsDeadlineExceeded(reply.status())) {
    return absl::DeadlineExceededError(absl::StrCat(
        "no answer from the scheduler at ", options_.scheduler, " within ",
        absl::FormatDuration(options_.register_timeout),
        ": is it running, reachable, and expecting this many nodes?"));
  }
  if (!reply.ok()) {
    return absl::Status(reply.status().code(),
                        absl::StrCat("registration refused: ", reply.status().message()));
  }
  R2SP_ASSIGN_OR_RETURN(proto::RegisterReply registered, RegisterReplyOf(*reply));
  rank_ = registered.rank();
  return registered;
}

absl::Status SchedulerClient::Barrier(proto::Group group) {
  Message request;
  request.header = NewHeader(proto::BARRIER);
  request.header.mutable_barrier()->set_group(group);
  request.header.mutable_barrier()->set_barrier_id(next_barrier_id_[group]++);
  absl::StatusOr<Message> reply = CallScheduler(std::move(request), options_.barrier_timeout);
  return reply.status();
}

absl::Status SchedulerClient::Finish(const proto::NodeCounters& counters) {
  Message request;
  request.header = NewHeader(proto::FINISH);
  *request.header.mutable_counters() = counters;
  return CallScheduler(std::move(request), options_.request_timeout).status();
}

absl::Status SchedulerClient::Leave(const std::string& why,
                                    const proto::NodeCounters& counters) {
  Message request;
  request.header = NewHeader(proto::LEAVE);
  *request.header.mutable_leave() = MakeLeaveRequest(why, counters);
  return CallScheduler(std::move(request), options_.request_timeout).status();
}

absl::StatusOr<proto::HeartbeatReply> SchedulerClient::HeartbeatNow() {
  Message request;
  request.header = NewHeader(proto::HEARTBEAT);
  request.header.mutable_heartbeat()->set_progress(progress_.load(std::memory_order_relaxed));
  R2SP_ASSIGN_OR_RETURN(Message reply,
                        CallScheduler(std::move(request), options_.request_timeout));
  const proto::HeartbeatReply& beat = reply.header.heartbeat_reply();
  if (beat.declared_dead()) return absl::AbortedError("the scheduler declared this node dead");
  if (!beat.job_failed().empty()) {
    return absl::AbortedError(absl::StrCat("the job failed: ", beat.job_failed()));
  }
  return beat;
}

absl::StatusOr<std::vector<int>> SchedulerClient::EpochPlan(int epoch, bool starting) {
  Message request;
  request.header = NewHeader(proto::EPOCH_PLAN);
  request.header.mutable_epoch_plan_request()->set_epoch(epoch);
  request.header.mutable_epoch_plan_request()->set_starting(starting);
  R2SP_ASSIGN_OR_RETURN(Message reply,
                        CallScheduler(std::move(request), options_.request_timeout));
  const auto& live = reply.header.epoch_plan().live_shards();
  return std::vector<int>(live.begin(), live.end());
}

Message SchedulerClient::SlotRequest(int samples, double compute_seconds, double comm_seconds,
                                     int64_t iterations_left) const {
  Message request;
  request.header = NewHeader(proto::SLOT);
  request.header.mutable_report()->set_samples(samples);
  request.header.mutable_report()->set_compute_seconds(compute_seconds);
  request.header.mutable_report()->set_comm_seconds(comm_seconds);
  request.header.mutable_report()->set_iterations_left(iterations_left);
  return request;
}

absl::StatusOr<proto::SlotGrant> SchedulerClient::RequestSlot(int samples,
                                                              double compute_seconds,
                                                              double comm_seconds,
                                                              int64_t iterations_left) {
  R2SP_ASSIGN_OR_RETURN(
      Message reply,
      CallScheduler(SlotRequest(samples, compute_seconds, comm_seconds, iterations_left),
                    options_.barrier_timeout));
  return reply.header.slot_grant();
}

void SchedulerClient::RequestSlotAsync(
    int samples, double compute_seconds, double comm_seconds, int64_t iterations_left,
    std::function<void(absl::StatusOr<proto::SlotGrant>)> done) {
  requester_->Request(options_.scheduler,
                      SlotRequest(samples, compute_seconds, comm_seconds, iterations_left),
                      options_.barrier_timeout,
                      [done = std::move(done)](absl::StatusOr<Message> reply) {
                        absl::Status s = reply.ok() ? FromReplyHeader(reply->header)
                                                    : reply.status();
                        if (!s.ok()) {
                          done(std::move(s));
                        } else {
                          done(reply->header.slot_grant());
                        }
                      });
}

void SchedulerClient::ReleaseSlot(bool leaving) {
  Message request;
  request.header = NewHeader(proto::RELEASE);
  if (leaving) request.header.mutable_report()->set_leaving(true);
  SendAsync(std::move(request), options_.request_timeout, "releasing the slot", nullptr);
}

void SchedulerClient::Report(int samples, double compute_seconds, double comm_seconds,
                             int64_t iterations_left, std::function<void(int)> on_batch) {
  Message request;
  request.header = NewHeader(proto::REPORT);
  request.header.mutable_report()->set_samples(samples);
  request.header.mutable_report()->set_compute_seconds(compute_seconds);
  request.header.mutable_report()->set_comm_seconds(comm_seconds);
  request.header.mutable_report()->set_iterations_left(iterations_left);
  SendAsync(std::move(request), options_.request_timeout, "iteration report",
            [on_batch = std::move(on_batch)](const proto::Header& reply) {
              if (reply.batch().batch_size() > 0) on_batch(reply.batch().batch_size());
            });
}

void SchedulerClient::SendAsync(Message request, absl::Duration timeout, const char* what,
                                std::function<void(const proto::Header&)> on_ok) {
  requester_->Request(options_.scheduler, std::move(request), timeout,
                      [what, on_ok = std::move(on_ok)](absl::StatusOr<Message> reply) {
                        const absl::Status s =
                            reply.ok() ? FromReplyHeader(reply->header) : reply.status();
                        if (!s.ok()) {
                          LOG(WARNING) << what << ": " << s;
                        } else if (on_ok) {
                          on_ok(reply->header);
                        }
                      });
}

void SchedulerClient::StartHeartbeats(
    std::function<void(const proto::HeartbeatReply&)> on_reply,
    std::function<void(const std::string&)> on_fatal) {
  CHECK(!heartbeat_thread_.joinable()) << "heartbeats already running";
  on_fatal_ = std::move(on_fatal);
  last_answer_micros_ = absl::ToUnixMicros(absl::Now());
  heartbeat_thread_ = std::thread([this, on_reply = std::move(on_reply)] {
    absl::Time last_tick = absl::Now();
    absl::Time resumed = absl::InfinitePast();  // the end of this process's last gap
    while (!stop_heartbeats_.WaitForNotificationWithTimeout(options_.heartbeat_period)) {
      const absl::Time now = absl::Now();
      // A gap in the ticks: this process did not run (stopped, or starved of CPU) and could not
      // have heard the scheduler, so its silence counts only from now; the next answer says
      // what the scheduler made of the gap (declared this node dead, say).
      if (now - last_tick > options_.heartbeat_period * 3) resumed = now;
      last_tick = now;
      const absl::Duration silent = std::min(SilentFor(), now - resumed);
      if (silent > options_.scheduler_timeout) {
        Fatal(absl::StrCat("lost the scheduler at ", options_.scheduler, ": no heartbeat "
                           "answered for ", absl::FormatDuration(silent)));
      }
      Message beat;
      beat.header = NewHeader(proto::HEARTBEAT);
      beat.header.mutable_heartbeat()->set_progress(progress_.load(std::memory_order_relaxed));
      beat.header.mutable_heartbeat()->set_news_seen(news_seen_.load());
      requester_->Request(
          options_.scheduler, std::move(beat), options_.heartbeat_period * 3,
          [this, on_reply](absl::StatusOr<Message> reply) {
            if (!reply.ok()) {
              LOG(WARNING) << "heartbeat: " << reply.status();
              return;
            }
            const absl::Status s = FromReplyHeader(reply->header);
            const proto::HeartbeatReply& beat = reply->header.heartbeat_reply();
            // A verdict is given before the answer counts, so that AwaitVerdictIfSilent, which
            // waits for an answer, finds it given.
            if (s.ok() && beat.declared_dead()) {
              Fatal("the scheduler declared this node dead (it was silent or made no progress "
                    "for too long) and goes on without it");
            } else if (s.ok() && !beat.job_failed().empty()) {
              Fatal(absl::StrCat("the job failed: ", beat.job_failed()));
            }
            last_answer_micros_ = absl::ToUnixMicros(absl::Now());  // it is alive, at least
            if (!s.ok()) {
              LOG(WARNING) << "heartbeat: " << s;
            } else if (!beat.declared_dead() && beat.job_failed().empty()) {
              if (on_reply) on_reply(beat);
              // Answers may overtake each other: each held the news from at most our
              // news_seen_ on, so the newest version seen is what we have taken in.
              int64_t seen = news_seen_.load();
              while (beat.news_version() > seen &&
                     !news_seen_.compare_exchange_weak(seen, beat.news_version())) {
              }
            }
          });
    }
  });
}

absl::Duration SchedulerClient::SilentFor() const {
  if (!heartbeat_thread_.joinable()) return absl::ZeroDuration();
  return absl::Now() - absl::FromUnixMicros(last_answer_micros_.load());
}

void SchedulerClient::AwaitVerdictIfSilent() const {
  const absl::Time deadline = absl::Now() + options_.scheduler_timeout;
  while (SilentFor() > options_.heartbeat_period * 1.5 && absl::Now() < deadline &&
         !stop_heartbeats_.HasBeenNotified()) {
    absl::SleepFor(options_.heartbeat_period / 4);
  }
}

void SchedulerClient::Fatal(const std::string& why) {
  if (fatal_called_.exchange(true)) return;
  LOG(ERROR) << why;
  if (on_fatal_) on_fatal_(why);
}

void SchedulerClient::StopHeartbeats() {
  if (!heartbeat_thread_.joinable()) return;
  if (!stop_heartbeats_.HasBeenNotified()) stop_heartbeats_.Notify();
  heartbeat_thread_.join();
}

}  // namespace r2sp
