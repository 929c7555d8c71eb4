// ZeroMQ transport; see transport.h. The I/O thread polls an eventfd (outbox wake-ups), a
// timerfd (ticks), the ROUTER (incoming requests) and every DEALER (incoming replies).
#include "common/transport.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/router_socket.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "zmq_addon.hpp"

namespace r2sp {
namespace {

constexpr int kMaxBatch = 256;      // messages taken from one socket per poll round
constexpr char kZapDomain[] = "r2sp";

// Takes one message off `socket` without waiting; false when none is waiting or it failed.
bool TryReceive(zmq::socket_t& socket, const char* name, std::vector<zmq::message_t>& frames) {
  frames.clear();
  try {
    return zmq::recv_multipart(socket, std::back_inserter(frames), zmq::recv_flags::dontwait)
        .has_value();
  } catch (const zmq::error_t& e) {
    LOG(WARNING) << name << " receive: " << e.what();
    return false;
  }
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
  if (options.context != nullptr && options.curve != nullptr) {
    return absl::InvalidArgumentError(
        "a transport with CURVE keys needs a ZeroMQ context of its own (for its ZAP handler)");
  }
  std::unique_ptr<Transport> transport(new Transport(options));
  R2SP_RETURN_IF_ERROR(transport->Bind());
  return transport;
}

Transport::Transport(const TransportOptions& options)
    : options_(options),
      routing_id_(NewRoutingId()),
      context_(options.context != nullptr
                   ? options.context
                   : std::make_shared<zmq::context_t>(options.zmq_io_threads)),
      router_(*context_, zmq::socket_type::router),
      inbound_(options.max_outstanding_per_peer),
      peers_(*context_, PeerConnectionsOptions{routing_id_, options.connections_per_peer,
                                              options.zmq_io_threads, options.queue_messages,
                                              options.max_frame_bytes, kLingerMs,
                                              options.curve}) {}

absl::Status Transport::Bind() {
  R2SP_ASSIGN_OR_RETURN(wakeups_, LoopWakeups::Create());
  if (options_.curve != nullptr) {
    // Before the ROUTER binds: a CURVE server with no ZAP handler accepts any client key.
    R2SP_ASSIGN_OR_RETURN(zap_, ZapHandler::Start(*context_, *options_.curve));
  }
  RouterSocketOptions router;
  router.bind_endpoint = options_.bind_endpoint;
  router.advertise_host = options_.advertise_host;
  router.linger_ms = kLingerMs;
  // Replies a peer leaves unread beyond this are dropped; a reading peer never has more
  // queued than its outstanding requests.
  router.send_queue = 2 * options_.max_outstanding_per_peer + options_.queue_messages;
  router.receive_queue = options_.queue_messages;
  router.max_frame_bytes = options_.max_frame_bytes;
  router.curve = options_.curve.get();
  router.zap_domain = kZapDomain;
  R2SP_ASSIGN_OR_RETURN(endpoint_, BindRouter(router_, router));
  return absl::OkStatus();
}

Transport::~Transport() { Stop(); }

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
  // The I/O thread sends what it queued itself before it polls again (Loop): a wake-up would
  // be a wasted syscall per reply (1,024 for a barrier of 1,024 workers).
  if (std::this_thread::get_id() != io_thread_.load()) Wake();
}

void Transport::Request(const std::string& peer_endpoint, Message request,
                        absl::Duration timeout, ReplyCallback callback) {
  CHECK(callback) << "Request needs a callback";
  Enqueue(Outgoing{false, peer_endpoint, std::move(request), absl::Now() + timeout,
                   std::move(callback)});
}

void Transport::SendReply(const std::string& routing_id, Message reply) {
  inbound_.Release(ProcessOfRoutingId(routing_id));
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
  counters.timed_out_requests = tracker_.counts().timed_out;
  counters.requests_received = inbound_.taken();
  counters.refused_requests = inbound_.refused();
  return counters;
}

void Transport::Loop() {
  io_thread_.store(std::this_thread::get_id());
  std::vector<zmq_pollitem_t> items;
  absl::Time next_tick = absl::Now();
  constexpr size_t kFirstDealer = 3;  // after the eventfd, the timerfd and the ROUTER
  while (true) {
    items.clear();
    items.push_back({nullptr, wakeups_->event_fd(), ZMQ_POLLIN, 0});
    items.push_back({nullptr, wakeups_->timer_fd(), ZMQ_POLLIN, 0});
    items.push_back({router_.handle(), 0, ZMQ_POLLIN, 0});
    const std::vector<zmq::socket_t*>& dealers = peers_.sockets();
    for (zmq::socket_t* dealer : dealers) {
      items.push_back({dealer->handle(), 0, ZMQ_POLLIN, 0});
    }
    RequestHandler* waker = handler_.load();
    const absl::Time wake = std::min(next_tick, waker != nullptr ? waker->NextWakeup()
                                                                 : absl::InfiniteFuture());
    // The timerfd, not zmq_poll's millisecond timeout, ends the wait (loop_wakeups.h); at once
    // if this thread queued more (a send's callback did: Enqueue does not wake it).
    const bool queued = [this] { absl::MutexLock lock(&mu_); return !outbox_.empty(); }();
    wakeups_->ArmTimer(queued ? absl::ZeroDuration() : wake - absl::Now());
    const int ready = zmq_poll(items.data(), static_cast<int>(items.size()), -1);
    if (ready < 0 && zmq_errno() != EINTR) {
      LOG(ERROR) << "zmq_poll: " << zmq_strerror(zmq_errno());
    }
    const bool woken = (items[0].revents & ZMQ_POLLIN) != 0;
    if (woken) wakeups_->ClearEvent();
    if (items[1].revents & ZMQ_POLLIN) wakeups_->ClearTimer();
    DrainOutbox();
    if (items[2].revents & ZMQ_POLLIN) ReceiveFromRouter();
    // The sockets may have grown in DrainOutbox; only the polled ones have revents.
    for (size_t i = kFirstDealer; i < items.size(); ++i) {
      if (items[i].revents & ZMQ_POLLIN) ReceiveFromDealer(*dealers[i - kFirstDealer]);
    }
    if (woken) ApplyResets();  // ResetPeer wakes the thread
    const absl::Time now = absl::Now();
    if (now >= next_tick) {
      tracker_.ExpireDue(now);
      tracker_.ReportUnanswered(now, options_.warn_unanswered);  // logged there
      next_tick = now + options_.tick_period;
    }
    if (now >= wake) {
      RequestHandler* handler = handler_.load();
      if (handler != nullptr && !stopping_.load()) handler->OnTick(now);
    }
    DrainOutbox();  // what the handlers and callbacks above queued (Enqueue did not wake us)
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
  tracker_.CancelAll(absl::CancelledError("transport stopped"));
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
  const int connection = peers_.ConnectionFor(item.destination, item.message.header);
  absl::StatusOr<zmq::socket_t*> dealer = peers_.DealerFor(item.destination, connection);
  if (!dealer.ok()) {
    item.callback(dealer.status());
    return;
  }
  const RequestLabel label{absl::Now(), item.message.header.type(), item.message.header.key()};
  const uint64_t id = tracker_.Add(item.destination, connection, item.deadline,
                                   std::move(item.callback), label);
  item.message.header.set_request_id(id);
  item.message.header.set_is_reply(false);
  const size_t bytes = PayloadBytes(item.message);
  try {
    SendFrames(**dealer, item.message, nullptr);
    absl::MutexLock lock(&mu_);
    counters_.payload_bytes_sent += bytes;
  } catch (const zmq::error_t& e) {
    tracker_.Fail(id, absl::UnavailableError(
                          absl::StrCat("cannot send to ", item.destination, ": ", e.what())));
  }
}

void Transport::SendFrames(zmq::socket_t& socket, Message& message,
                           const std::string* routing_id) {
  zmq::message_t header = EncodeHeader(message);
  if (routing_id != nullptr) socket.send(zmq::buffer(*routing_id), zmq::send_flags::sndmore);
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
    if (!TryReceive(router_, "ROUTER", frames)) return;
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
    if (!inbound_.Take(process)) {
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
    if (!TryReceive(dealer, "DEALER", frames)) return;
    absl::StatusOr<Message> decoded = DecodeFrames(frames, options_.decode_limits);
    if (!decoded.ok()) {
      Drop(absl::StrCat("bad reply: ", decoded.status().message()));
      continue;
    }
    std::optional<OutstandingRequest> request;
    if (decoded->header.is_reply()) request = tracker_.TakeAnswered(decoded->header.request_id());
    if (!request.has_value()) {
      Drop(absl::StrCat("unexpected reply to request ", decoded->header.request_id()));
      continue;
    }
    peers_.Answered(request->peer, request->connection);
    {
      absl::MutexLock lock(&mu_);
      ++counters_.replies_received;
      counters_.payload_bytes_received += PayloadBytes(*decoded);
    }
    request->callback(*std::move(decoded));
  }
}

void Transport::ExpectPeer(const std::string& peer_endpoint, proto::Role role) {
  peers_.ExpectPeer(peer_endpoint, role);
}

void Transport::ResetPeer(const std::string& peer_endpoint, const std::string& why) {
  {
    absl::MutexLock lock(&mu_);
    resets_.emplace_back(peer_endpoint, why);
  }
  Wake();
}

void Transport::ApplyResets() {
  std::vector<std::pair<std::string, std::string>> resets;
  {
    absl::MutexLock lock(&mu_);
    resets.swap(resets_);
  }
  for (const auto& [peer, why] : resets) {
    peers_.Close(peer);
    const size_t failed =
        tracker_.CancelPeer(peer, absl::UnavailableError(absl::StrCat(peer, " was lost: ", why)));
    LOG(WARNING) << "connection to " << peer << " reset (" << why << "); " << failed
                 << " requests to it failed";
  }
}

void Transport::ReplyFromTransport(const std::string& routing_id, proto::ErrorCode code,
                                   const std::string& why, const proto::Header* request) {
  proto::Header error;
  if (request != nullptr) {
    error = ReplyHeaderFor(*request, absl::OkStatus());
  } else {
    error.set_type(proto::ERROR);
    error.set_is_reply(true);
  }
  error.set_code(code);
  error.set_error(why);
  Enqueue(Outgoing{true, routing_id, Message{std::move(error), {}}, absl::InfiniteFuture(),
                   nullptr});
}

proto::Role Transport::AuthenticatedRole(zmq::message_t& frame) const {
  if (options_.curve == nullptr) return proto::ROLE_UNSPECIFIED;
  const char* user = zmq_msg_gets(frame.handle(), "User-Id");
  return user != nullptr ? RoleFromKeyName(user) : proto::ROLE_UNSPECIFIED;
}

void Transport::Drop(const std::string& why) {
  absl::MutexLock lock(&mu_);
  ++counters_.dropped_messages;
  int64_t suppressed = 0;
  if (drop_log_.ShouldLog(absl::Now(), &suppressed)) {
    LOG(WARNING) << "dropped message: " << why << " (" << suppressed
                 << " more dropped or refused since the last report)";
  }
}

}  // namespace r2sp
