// A server's or worker's side of the scheduler protocol: register (blocking, bounded),
// barriers, heartbeats on a background thread, and FINISH.
#ifndef R2SP_COMMON_SCHEDULER_CLIENT_H_
#define R2SP_COMMON_SCHEDULER_CLIENT_H_

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/handler.h"
#include "proto/messages.pb.h"

namespace r2sp {

struct SchedulerClientOptions {
  std::string scheduler;  // e.g. tcp://127.0.0.1:9000. REQUIRES: non-empty.
  std::string endpoint;   // ours, as the other nodes reach us (sent with REGISTER)
  absl::Duration register_timeout = absl::Seconds(60);
  absl::Duration barrier_timeout = absl::Minutes(30);
  absl::Duration request_timeout = absl::Seconds(30);
  absl::Duration heartbeat_period = absl::Seconds(1);
  // The scheduler counts as lost when no heartbeat has been answered for this long.
  absl::Duration scheduler_timeout = absl::Seconds(9);
};

// Thread-safety: Register, Barrier and Finish are for one thread (the node's main thread);
// heartbeats run on their own thread. `requester` (borrowed; the node's transport, or a test's
// in-process network) must outlive this object.
class SchedulerClient {
 public:
  SchedulerClient(Requester* requester, const SchedulerClientOptions& options);
  ~SchedulerClient();

  // Registers this node and waits for every other node; returns its rank and the book.
  // `wants_data_shard`, `requested_rank` (-1: none; else sent): proto RegisterRequest.
  absl::StatusOr<proto::RegisterReply> Register(proto::Role role,
                                                const std::vector<proto::TensorSpec>& model,
                                                bool wants_data_shard = false,
                                                int requested_rank = -1);
  // Waits until every live member of `group` has arrived.
  absl::Status Barrier(proto::Group group);
  // A worker that joined a running job takes up the groups' barrier counts from its reply.
  void SetNextBarrier(proto::Group group, uint64_t id) { next_barrier_id_[group] = id; }
  // Workers, with AddressBook.absorb_orphaned_shards: the data shards live in `epoch` (proto
  // EpochPlan; `starting`: proto EpochPlanRequest).
  absl::StatusOr<std::vector<int>> EpochPlan(int epoch, bool starting);
  // Workers: reports the final counters.
  absl::Status Finish(const proto::NodeCounters& counters);
  // Workers: this one stops now, before the end of training (`why`: a signal, preemption),
  // with its counters so far; the scheduler counts it dead at once (proto LEAVE).
  absl::Status Leave(const std::string& why, const proto::NodeCounters& counters);

  // R2SP: asks for this worker's communication slot after an iteration's compute (reported
  // for the gap and, with hetero batching, the tuner) and waits for the grant.
  // `comm_seconds`: the worker's own push + pull time in its previous exchange;
  // `iterations_left`: this iteration and those still to come (0: unknown; for the tuner).
  absl::StatusOr<proto::SlotGrant> RequestSlot(int samples, double compute_seconds,
                                               double comm_seconds = 0,
                                               int64_t iterations_left = 0);
  // R2SP: the same request without waiting (r2sp with --overlap asks before backward ends):
  // `done` gets the grant or the error on the transport's I/O thread.
  void RequestSlotAsync(int samples, double compute_seconds, double comm_seconds,
                        int64_t iterations_left,
                        std::function<void(absl::StatusOr<proto::SlotGrant>)> done);
  // R2SP: gives the slot back; `leaving` after the worker's last iteration takes it out of the
  // ring, so the others do not wait for its turn. Asynchronous; an error is logged.
  void ReleaseSlot(bool leaving = false);
  // Hetero batching (bsp, ssp, asp, easgd, eawild): reports an iteration (`iterations_left` as
  // for RequestSlot); `on_batch` (on the transport's I/O thread) receives the batch size to use
  // from the next iteration.
  void Report(int samples, double compute_seconds, double comm_seconds, int64_t iterations_left,
              std::function<void(int)> on_batch);

  // Sends a heartbeat every heartbeat_period; `on_reply` (may be empty) sees each answer on
  // the transport's I/O thread. An answer's dead and finished workers are those this node has
  // not been told of yet (proto HeartbeatRequest.news_seen: the first answer names all of
  // them, later ones what is new), so `on_reply` keeps what it learns. `on_fatal` (may be
  // empty) is called once, on the heartbeat or the I/O thread, when this node can no longer be
  // part of the job, with why: the scheduler answered no heartbeat for scheduler_timeout
  // (counted while this process ran: after it was stopped or starved, from when it runs
  // again), declared this node dead, or failed the job.
  void StartHeartbeats(std::function<void(const proto::HeartbeatReply&)> on_reply,
                       std::function<void(const std::string&)> on_fatal = nullptr);
  void StopHeartbeats();

  // One heartbeat now, waited for: the scheduler's news, every dead and finished worker, as of
  // after everything this node saw from it before the call (a worker past the final barrier
  // learns every death the barrier waited for). Aborted if the scheduler declared this node
  // dead or the job failed.
  absl::StatusOr<proto::HeartbeatReply> HeartbeatNow();

  // How long since the scheduler last answered a heartbeat (zero before heartbeats start).
  absl::Duration SilentFor() const;
  // After an error that may come from the job falling apart (a server stopped serving because
  // it lost the scheduler, say): while the scheduler is silent, waits up to scheduler_timeout
  // for the heartbeats' verdict, so that on_fatal, not the error, says why the node stops.
  // Returns at once if heartbeats are not running or the scheduler answers.
  void AwaitVerdictIfSilent() const;

  // Workers: counts one step of progress (an iteration, an answered push or pull); heartbeats
  // carry the count, and a worker whose count stands still too long is declared dead.
  void NoteProgress() { progress_.fetch_add(1, std::memory_order_relaxed); }

  // A request header carrying this node's role and rank.
  proto::Header NewHeader(proto::MsgType type) const;
  int rank() const { return rank_; }

 private:
  absl::StatusOr<Message> CallScheduler(Message request, absl::Duration timeout);
  Message SlotRequest(int samples, double compute_seconds, double comm_seconds,
                      int64_t iterations_left) const;
  // Sends without waiting: a failure is logged with `what`; `on_ok` (may be empty) sees a
  // successful reply on the transport's I/O thread.
  void SendAsync(Message request, absl::Duration timeout, const char* what,
                 std::function<void(const proto::Header&)> on_ok);

  Requester* const requester_;
  const SchedulerClientOptions options_;
  proto::Role role_ = proto::ROLE_UNSPECIFIED;
  int rank_ = -1;
  absl::flat_hash_map<int, uint64_t> next_barrier_id_;
  // Called with the reason once (see StartHeartbeats).
  void Fatal(const std::string& why);

  absl::Notification stop_heartbeats_;
  std::thread heartbeat_thread_;
  std::atomic<int64_t> progress_{0};
  // The news_version of the newest heartbeat answer whose news on_reply has seen.
  std::atomic<int64_t> news_seen_{0};
  std::atomic<int64_t> last_answer_micros_{0};  // when the scheduler last answered a heartbeat
  std::atomic<bool> fatal_called_{false};
  std::function<void(const std::string&)> on_fatal_;
};

// A string unique to this process instance (host:pid:random).
std::string MakeInstanceId();

}  // namespace r2sp

#endif  // R2SP_COMMON_SCHEDULER_CLIENT_H_
