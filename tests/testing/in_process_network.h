// The processes of a job inside one test binary: handlers (ServerHandler, SchedulerCore) serve
// under endpoint names, and clients (PsClient, SchedulerClient) reach them through Requesters
// this network hands out. One thread plays the part of every transport's I/O thread: it hands
// requests to handlers, replies to callbacks, calls OnTick, and ends requests that outlive
// their timeout with DeadlineExceeded, all in one order as the sockets would, but without them.
#ifndef R2SP_TESTS_TESTING_IN_PROCESS_NETWORK_H_
#define R2SP_TESTS_TESTING_IN_PROCESS_NETWORK_H_

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/handler.h"

namespace r2sp::testing {

class InProcessNetwork : public ReplySink {
 public:
  explicit InProcessNetwork(absl::Duration tick_period = absl::Milliseconds(5));
  // Stops the thread; requests still waiting end with Cancelled.
  ~InProcessNetwork() override;

  // `handler` (borrowed; outlives the network: declare the network after it) answers requests sent to `endpoint`. A request
  // to an endpoint nobody serves waits for its timeout, as over TCP.
  void Serve(const std::string& endpoint, RequestHandler* handler);
  // A Requester whose requests come from `name` (the routing id handlers see). Owned here.
  Requester* Client(const std::string& name);

  void SendReply(const std::string& routing_id, Message reply) override;

 private:
  class Endpoint;
  struct Pending {
    ReplyCallback callback;
    absl::Time deadline;
  };

  void Post(std::function<void()> task);
  void Send(const std::string& from, const std::string& to, Message request,
            absl::Duration timeout, ReplyCallback callback);
  void Loop();
  void TickAndExpire(absl::Time now);

  const absl::Duration tick_period_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<std::string, std::unique_ptr<Endpoint>> clients_ ABSL_GUARDED_BY(mu_);

  // Touched only by the network's thread (after construction).
  absl::flat_hash_map<std::string, RequestHandler*> handlers_;
  absl::flat_hash_map<uint64_t, Pending> pending_;  // by request id
  uint64_t next_request_id_ = 1;
  absl::Time next_tick_;
  std::thread thread_;
};

}  // namespace r2sp::testing

#endif  // R2SP_TESTS_TESTING_IN_PROCESS_NETWORK_H_
