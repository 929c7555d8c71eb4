// See in_process_network.h.
#include "tests/testing/in_process_network.h"

#include <utility>
#include <vector>

#include "absl/time/clock.h"

namespace r2sp::testing {

class InProcessNetwork::Endpoint : public Requester {
 public:
  Endpoint(InProcessNetwork* network, std::string name)
      : network_(network), name_(std::move(name)) {}
  const std::string& RoutingId() const override { return name_; }
  void Request(const std::string& peer_endpoint, Message request, absl::Duration timeout,
               ReplyCallback callback) override {
    network_->Send(name_, peer_endpoint, std::move(request), timeout, std::move(callback));
  }

 private:
  InProcessNetwork* const network_;
  const std::string name_;
};

InProcessNetwork::InProcessNetwork(absl::Duration tick_period)
    : tick_period_(tick_period), next_tick_(absl::Now()), thread_([this] { Loop(); }) {}

InProcessNetwork::~InProcessNetwork() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
  for (auto& [id, pending] : pending_) pending.callback(absl::CancelledError("network stopped"));
}

void InProcessNetwork::Serve(const std::string& endpoint, RequestHandler* handler) {
  Post([this, endpoint, handler] { handlers_[endpoint] = handler; });
}

Requester* InProcessNetwork::Client(const std::string& name) {
  absl::MutexLock lock(&mu_);
  std::unique_ptr<Endpoint>& client = clients_[name];
  if (client == nullptr) client = std::make_unique<Endpoint>(this, name);
  return client.get();
}

void InProcessNetwork::Post(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
}

void InProcessNetwork::Send(const std::string& from, const std::string& to, Message request,
                            absl::Duration timeout, ReplyCallback callback) {
  // std::function needs a copyable callable: the message travels in a shared_ptr.
  auto message = std::make_shared<Message>(std::move(request));
  Post([this, from, to, message, timeout, callback = std::move(callback)]() mutable {
    const uint64_t id = next_request_id_++;
    message->header.set_request_id(id);
    pending_[id] = Pending{std::move(callback), absl::Now() + timeout};
    auto handler = handlers_.find(to);
    if (handler == handlers_.end()) return;  // nobody listens: the request times out
    Responder responder(this, from, message->header);
    handler->second->HandleRequest(std::move(*message), std::move(responder));
  });
}

void InProcessNetwork::SendReply(const std::string& /*routing_id*/, Message reply) {
  auto message = std::make_shared<Message>(std::move(reply));
  Post([this, message] {
    auto it = pending_.find(message->header.request_id());
    if (it == pending_.end()) return;  // timed out already: dropped, as the transport does
    ReplyCallback callback = std::move(it->second.callback);
    pending_.erase(it);
    callback(std::move(*message));
  });
}

void InProcessNetwork::TickAndExpire(absl::Time now) {
  absl::Time wakeup = next_tick_;
  for (auto& [endpoint, handler] : handlers_) wakeup = std::min(wakeup, handler->NextWakeup());
  if (now >= wakeup) {
    for (auto& [endpoint, handler] : handlers_) handler->OnTick(now);
    next_tick_ = now + tick_period_;
  }
  std::vector<uint64_t> expired;
  for (const auto& [id, pending] : pending_) {
    if (pending.deadline <= now) expired.push_back(id);
  }
  for (uint64_t id : expired) {
    ReplyCallback callback = std::move(pending_[id].callback);
    pending_.erase(id);
    callback(absl::DeadlineExceededError("no reply in time"));
  }
}

void InProcessNetwork::Loop() {
  while (true) {
    std::deque<std::function<void()>> tasks;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !tasks_.empty();
      };
      mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(1));
      if (stopping_) return;
      tasks.swap(tasks_);
    }
    for (std::function<void()>& task : tasks) task();
    TickAndExpire(absl::Now());
  }
}

}  // namespace r2sp::testing
