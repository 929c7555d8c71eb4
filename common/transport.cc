// ZeroMQ transport; see transport.h. The I/O thread polls an eventfd (outbox wake-ups), the
// ROUTER (incoming requests) and every DEALER (incoming replies).
#include "common/transport.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/notification.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "zmq_addon.hpp"

namespace r2sp {
namespace {

constexpr int kMaxBatch = 256;      // messages taken from one socket per poll round
constexpr char kZapDomain[] = "r2sp";

// 32 random hex digits: a transport's routing id (never starting with a zero byte, which
// libzmq reserves for the ids it makes up).
std::string RandomRoutingId() {
  std::random_device rd;
  std::string id;
  for (int i = 0; i < 4; ++i) absl::StrAppend(&id, absl::Hex(rd(), absl::kZeroPad8));
  return id;
}

// Replaces the host of "tcp://HOST:PORT" with `host`.
std::string WithHost(const std::string& endpoint, const std::string& host) {
  const size_t scheme = endpoint.find("://");
  const size_t colon = endpoint.rfind(':');
  if (scheme == std::string::npos || colon == std::string::npos || colon < scheme + 3) {
    return endpoint;
  }
  return absl::StrCat(endpoint.substr(0, scheme + 3), host, endpoint.substr(colon));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> Transport::Create(const TransportOptions& options) {
  if (options.zmq_io_threads < 1 || options.connections_per_peer < 1 ||
      options.connections_per_peer > kMaxConnectionsPerPeer) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a transport needs at least one I/O thread and 1 to ", kMaxConnectionsPerPeer,
        " connections per peer; got ", options.zmq_io_threads, " and ",
        options.connections_per_peer));
  }
  std::unique_ptr<Transport> transport(new Transport(options));
  R2SP_RETURN_IF_ERROR(transport->Bind());
  return transport;
}

Transport::Transport(const TransportOptions& options)
    : options_(options),
      routing_id_(RandomRoutingId()),
      context_(options.zmq_io_threads),
      router_(context_, zmq::socket_type::router) {}

absl::Status Transport::Bind() {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) return absl::InternalError(absl::StrCat("eventfd: ", strerror(errno)));
  if (options_.curve != nullptr) {
    // Before the ROUTER binds: a CURVE server with no ZAP handler accepts any client key.
    R2SP_ASSIGN_OR_RETURN(zap_, ZapHandler::Start(context_, *options_.curve));
  }
  try {
    router_.set(zmq::sockopt::linger, kLingerMs);
    // Replies a peer leaves unread beyond this are dropped; a reading peer never has more
    // queued than its outstanding requests.
    router_.set(zmq::sockopt::sndhwm,
                2 * options_.max_outstanding_per_peer + options_.queue_messages);
    router_.set(zmq::sockopt::rcvhwm, options_.queue_messages);
    router_.set(zmq::sockopt::maxmsgsize, options_.max_frame_bytes);
    if (options_.curve != nullptr) {
      router_.set(zmq::sockopt::curve_server, true);
      router_.set(zmq::sockopt::curve_secretkey, options_.curve->secret_key);
      router_.set(zmq::sockopt::zap_domain, kZapDomain);
    }
    router_.bind(options_.bind_endpoint);
    endpoint_ = router_.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot bind ", options_.bind_endpoint, ": ", e.what()));
  }
  if (!options_.advertise_host.empty()) {
    endpoint_ = WithHost(endpoint_, options_.advertise_host);
  } else if (endpoint_.find("://0.0.0.0:") != std::string::npos) {
    endpoint_ = WithHost(endpoint_, "127.0.0.1");
  }
  return absl::OkStatus();
}

Transport::~Transport() {
  Stop();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void Transport::Start(RequestHandler* handler) {
  CHECK(!started_) << "Transport::Start called twice";
  started_ = true;
  handler_.store(handler);
  thread_ = std::thread([this] { Loop(); });
}

void Transport::Stop() {
  if (!started_ || stopping_.exchange(true)) return;
  Wake();
  thread_.join();
}

void Transport::Wake() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

void Transport::Enqueue(Outgoing item) {
  {
    absl::MutexLock lock(&mu_);
    if (!closed_) {
      outbox_.push_back(std::move(item));
      item.callback = nullptr;
    }
  }
  if (item.callback) {  // The I/O thread has exited: nothing will send this request.
    item.callback(absl::CancelledError("transport stopped"));
    return;
  }
  Wake();
}

void Transport::Request(const std::string& peer_endpoint, Message request,
                        absl::Duration timeout, ReplyCallback callback) {
  CHECK(callback) << "Request needs a callback";
  Enqueue(Outgoing{false, peer_endpoint, std::move(request), absl::Now() + timeout,
                   std::move(callback)});
}

void Transport::SendReply(const std::string& routing_id, Message reply) {
  {
    absl::MutexLock lock(&mu_);
    auto it = outstanding_.find(ProcessOfRoutingId(routing_id));
    if (it != outstanding_.end() && --it->second <= 0) outstanding_.erase(it);
  }
  Enqueue(Outgoing{true, routing_id, std::move(reply), absl::InfiniteFuture(), nullptr});
}

absl::StatusOr<Message> Transport::Call(const std::string& peer_endpoint, Message request,
                                        absl::Duration timeout) {
  CHECK(std::this_thread::get_id() != thread_.get_id()) << "Call() on the I/O thread";
  return CallAndWait(*this, peer_endpoint, std::move(request), timeout);
}

TransportCounters Transport::counters() const {
  absl::MutexLock lock(&mu_);
  TransportCounters counters = counters_;
  if (zap_ != nullptr) counters.refused_connections = zap_->refused();
  return counters;
}

void Transport::Loop() {
  std::vector<zmq_pollitem_t> items;
  absl::Time next_tick = absl::Now();
  while (true) {
    items.clear();
    items.push_back({nullptr, wake_fd_, ZMQ_POLLIN, 0});
    items.push_back({router_.handle(), 0, ZMQ_POLLIN, 0});
    for (zmq::socket_t* dealer : dealer_list_) {
      items.push_back({dealer->handle(), 0, ZMQ_POLLIN, 0});
    }
    RequestHandler* waker = handler_.load();
    const absl::Time wake = std::min(next_tick, waker != nullptr ? waker->NextWakeup()
                                                                 : absl::InfiniteFuture());
    // zmq_poll counts milliseconds; round up so we never spin before the wake-up time.
    const long timeout_ms =
        std::max<long>(0, absl::ToInt64Microseconds(wake - absl::Now()) / 1000 + 1);
    const int ready = zmq_poll(items.data(), static_cast<int>(items.size()), timeout_ms);
    if (ready < 0 && zmq_errno() != EINTR) {
      LOG(ERROR) << "zmq_poll: " << zmq_strerror(zmq_errno());
    }
    const bool woken = (items[0].revents & ZMQ_POLLIN) != 0;
    if (woken) {
      uint64_t value;
      (void)!read(wake_fd_, &value, sizeof(value));
    }
    DrainOutbox();
    if (items[1].revents & ZMQ_POLLIN) ReceiveFromRouter();
    // dealer_list_ may have grown in DrainOutbox; only the polled ones have revents.
    for (size_t i = 2; i < items.size(); ++i) {
      if (items[i].revents & ZMQ_POLLIN) ReceiveFromDealer(*dealer_list_[i - 2]);
    }
    if (woken) ApplyResets();  // ResetPeer wakes the thread
    const absl::Time now = absl::Now();
    if (now >= next_tick) {
      ExpireRequests(now, /*all=*/false);
      next_tick = now + options_.tick_period;
    }
    if (now >= wake) {
      RequestHandler* handler = handler_.load();
      if (handler != nullptr && !stopping_.load()) handler->OnTick(now);
    }
    if (stopping_.load()) {
      absl::MutexLock lock(&mu_);
      if (outbox_.empty()) break;
    }
  }
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }
  DrainOutbox();  // Sends the last replies; requests queued meanwhile are cancelled.
  ExpireRequests(absl::InfiniteFuture(), /*all=*/true);
}

void Transport::DrainOutbox() {
  std::deque<Outgoing> batch;
  {
    absl::MutexLock lock(&mu_);
    batch.swap(outbox_);
  }
  for (Outgoing& item : batch) SendOne(item);
}

void Transport::SendOne(Outgoing& item) {
  if (item.is_reply) {
    const size_t bytes = PayloadBytes(item.message);
    try {
      SendFrames(router_, item.message, &item.destination);
      absl::MutexLock lock(&mu_);
      counters_.payload_bytes_sent += bytes;
    } catch (const zmq::error_t& e) {
      LOG(WARNING) << "cannot send reply: " << e.what();
    }
    return;
  }
  if (stopping_.load()) {
    item.callback(absl::CancelledError("transport is stopping"));
    return;
  }
  const uint64_t id = next_request_id_++;
  item.message.header.set_request_id(id);
  item.message.header.set_is_reply(false);
  const size_t bytes = PayloadBytes(item.message);
  const int connection = ConnectionFor(item.destination, item.message.header);
  absl::StatusOr<zmq::socket_t*> dealer = DealerFor(item.destination, connection);
  if (!dealer.ok()) {
    item.callback(dealer.status());
    return;
  }
  try {
    pending_.emplace(id, Pending{std::move(item.callback), item.deadline, item.destination,
                                 connection});
    SendFrames(**dealer, item.message, nullptr);
    absl::MutexLock lock(&mu_);
    counters_.payload_bytes_sent += bytes;
  } catch (const zmq::error_t& e) {
    auto it = pending_.find(id);
    ReplyCallback callback =
        it != pending_.end() ? std::move(it->second.callback) : std::move(item.callback);
    if (it != pending_.end()) pending_.erase(it);
    callback(absl::UnavailableError(
        absl::StrCat("cannot send to ", item.destination, ": ", e.what())));
  }
}

void Transport::SendFrames(zmq::socket_t& socket, Message& message,
                           const std::string* routing_id) {
  zmq::message_t header = EncodeHeader(message);
  if (routing_id != nullptr) {
    socket.send(zmq::buffer(*routing_id), zmq::send_flags::sndmore);
  }
  const bool has_payload = !message.payload.empty();
  socket.send(header, has_payload ? zmq::send_flags::sndmore : zmq::send_flags::none);
  for (size_t i = 0; i < message.payload.size(); ++i) {
    const bool last = i + 1 == message.payload.size();
    socket.send(message.payload[i], last ? zmq::send_flags::none : zmq::send_flags::sndmore);
  }
}

void Transport::ReceiveFromRouter() {
  std::vector<zmq::message_t> frames;
  for (int n = 0; n < kMaxBatch; ++n) {
    frames.clear();
    zmq::recv_result_t got;
    try {
      got = zmq::recv_multipart(router_, std::back_inserter(frames), zmq::recv_flags::dontwait);
    } catch (const zmq::error_t& e) {
      LOG(WARNING) << "ROUTER receive: " << e.what();
      return;
    }
    if (!got) return;
    if (frames.size() < 2) {
      Drop("message without a header frame");
      continue;
    }
    std::string routing_id = frames[0].to_string();
    const proto::Role role = AuthenticatedRole(frames[1]);
    frames.erase(frames.begin());
    absl::StatusOr<Message> decoded = DecodeFrames(frames, options_.decode_limits);
    if (!decoded.ok()) {
      Drop(std::string(decoded.status().message()));
      ReplyFromTransport(routing_id, proto::BAD_MESSAGE, std::string(decoded.status().message()),
                         nullptr);
      continue;
    }
    if (decoded->header.is_reply()) {
      Drop("a reply arrived on the ROUTER socket");
      continue;
    }
    const absl::string_view process = ProcessOfRoutingId(routing_id);
    if (!TakeOutstanding(process)) {
      Drop(absl::StrCat("a peer has ", options_.max_outstanding_per_peer,
                        " requests outstanding already"));
      ReplyFromTransport(routing_id, proto::NOT_READY,
                         "too many requests outstanding from this peer", &decoded->header);
      continue;
    }
    {
      absl::MutexLock lock(&mu_);
      counters_.payload_bytes_received += PayloadBytes(*decoded);
    }
    // A further connection's reply goes back on it; the process's own needs no route of its own.
    std::string peer(process);
    if (peer.size() == routing_id.size()) routing_id.clear();
    Responder responder(this, std::move(peer), decoded->header, role, std::move(routing_id));
    RequestHandler* handler = handler_.load();
    if (handler == nullptr || stopping_.load()) {
      responder.ReplyStatus(absl::UnavailableError("this process takes no requests now"));
      continue;
    }
    handler->HandleRequest(*std::move(decoded), std::move(responder));
  }
}

void Transport::ReceiveFromDealer(zmq::socket_t& dealer) {
  std::vector<zmq::message_t> frames;
  for (int n = 0; n < kMaxBatch; ++n) {
    frames.clear();
    zmq::recv_result_t got;
    try {
      got = zmq::recv_multipart(dealer, std::back_inserter(frames), zmq::recv_flags::dontwait);
    } catch (const zmq::error_t& e) {
      LOG(WARNING) << "DEALER receive: " << e.what();
      return;
    }
    if (!got) return;
    absl::StatusOr<Message> decoded = DecodeFrames(frames, options_.decode_limits);
    if (!decoded.ok()) {
      Drop(absl::StrCat("bad reply: ", decoded.status().message()));
      continue;
    }
    auto it = pending_.find(decoded->header.request_id());
    if (!decoded->header.is_reply() || it == pending_.end()) {
      Drop(absl::StrCat("unexpected reply to request ", decoded->header.request_id()));
      continue;
    }
    ReplyCallback callback = std::move(it->second.callback);
    ConnectionAnswered(it->second.peer, it->second.connection);
    pending_.erase(it);
    {
      absl::MutexLock lock(&mu_);
      ++counters_.replies_received;
      counters_.payload_bytes_received += PayloadBytes(*decoded);
    }
    callback(*std::move(decoded));
  }
}

void Transport::ExpireRequests(absl::Time now, bool all) {
  std::vector<ReplyCallback> expired;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (all || it->second.deadline <= now) {
      expired.push_back(std::move(it->second.callback));
      pending_.erase(it++);
    } else {
      ++it;
    }
  }
  if (expired.empty()) return;
  if (!all) {
    absl::MutexLock lock(&mu_);
    counters_.timed_out_requests += expired.size();
  }
  for (ReplyCallback& callback : expired) {
    callback(all ? absl::CancelledError("transport stopped")
                 : absl::DeadlineExceededError("no reply before the deadline"));
  }
}

}  // namespace r2sp
