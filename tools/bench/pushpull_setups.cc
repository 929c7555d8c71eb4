// See pushpull_setups.h.
#include "tools/bench/pushpull_setups.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "common/codec/fp16.h"
#include "glog/logging.h"
#include "zmq_addon.hpp"

namespace r2sp::bench {
namespace {

void CheckOk(const absl::Status& s) { CHECK(s.ok()) << s; }

}  // namespace

RawZmq::RawZmq(size_t bytes)
    : bytes_(bytes),
      payload_(bytes, 1),
      router_(ctx_, zmq::socket_type::router),
      dealer_(ctx_, zmq::socket_type::dealer) {
  router_.bind("tcp://127.0.0.1:*");
  dealer_.connect(router_.get(zmq::sockopt::last_endpoint));
  receiver_ = std::thread([this] {
    for (;;) {
      std::vector<zmq::message_t> frames;
      CHECK(zmq::recv_multipart(router_, std::back_inserter(frames)));
      CHECK_EQ(frames.size(), 2u);
      if (frames[1].size() == 0) break;    // the destructor's stop message
      CHECK_EQ(frames[1].size(), bytes_);  // verify what was timed
      received_ += frames[1].size();
      router_.send(frames[0], zmq::send_flags::sndmore);
      router_.send(zmq::str_buffer("k"), zmq::send_flags::none);
    }
  });
}

RawZmq::~RawZmq() {
  dealer_.send(zmq::message_t(), zmq::send_flags::none);
  receiver_.join();
  CHECK_EQ(received_, bytes_ * sent_);  // verify: every byte arrived
}

void RawZmq::Once() {
  zmq::message_t msg(
      payload_.data(), bytes_, [](void*, void*) {}, nullptr);
  dealer_.send(msg, zmq::send_flags::none);
  zmq::message_t ack;
  CHECK(dealer_.recv(ack));
  ++sent_;
}

void AckHandler::HandleRequest(Message request, Responder responder) {
  CHECK_EQ(request.payload.size(), 1u);
  bytes_ += request.payload[0].size();
  responder.ReplyStatus(absl::OkStatus());
}

TransportOnly::TransportOnly(size_t bytes, size_t partition_bytes)
    : bytes_(bytes), partition_bytes_(partition_bytes), payload_(bytes, 1) {
  auto server = Transport::Create(TransportOptions());
  auto client = Transport::Create(TransportOptions());
  CHECK(server.ok() && client.ok());
  server_ = *std::move(server);
  client_ = *std::move(client);
  server_->Start(&ack_);
  client_->Start(nullptr);
}

TransportOnly::~TransportOnly() {
  client_->Stop();
  server_->Stop();
  CHECK_EQ(ack_.bytes(), bytes_ * sent_);  // verify: every byte arrived
}

void TransportOnly::Once() {
  absl::Mutex mu;
  int left = 0;
  for (size_t offset = 0; offset < bytes_; offset += partition_bytes_) {
    Message m;
    m.header.set_type(proto::PUSH);
    m.payload.push_back(
        BorrowedFrame(payload_.data() + offset, std::min(partition_bytes_, bytes_ - offset)));
    {
      absl::MutexLock lock(&mu);
      ++left;
    }
    client_->Request(server_->endpoint(), std::move(m), absl::Seconds(60),
                     [&](absl::StatusOr<Message> reply) {
                       CHECK(reply.ok()) << reply.status();
                       absl::MutexLock lock(&mu);
                       --left;
                     });
  }
  absl::MutexLock lock(&mu);
  mu.Await(absl::Condition(
      +[](int* n) { return *n == 0; }, &left));
  ++sent_;
}

Ours::Ours(const std::vector<float>& grads, const codec::CodecSpec& push_codec,
           size_t partition_bytes, const absl::flat_hash_map<int, JobKeys>* curve,
           int io_threads, int connections)
    : n_(grads.size()),
      push_codec_(push_codec),
      pull_codec_(push_codec.codec == proto::FP16 ? proto::FP16 : proto::FP32),
      grads_(grads),
      params_(n_, 0.5f) {
  proto::TensorSpec tensor;
  tensor.set_name("model");
  tensor.set_num_elements(n_);
  auto layout = ModelLayout::Create({tensor}, partition_bytes, 1);
  CHECK(layout.ok()) << layout.status();
  layout_ = std::make_unique<ModelLayout>(*std::move(layout));
  ServerOptions options;
  options.sgd = {0.01f, 0.9f, 1e-4f};
  options.sync = proto::ASP;
  CheckOk(options.Validate());
  handler_ = std::make_unique<ServerHandler>(options);
  TransportOptions server_options, client_options;
  if (curve != nullptr) {
    server_options.curve = std::make_shared<const JobKeys>(curve->at(proto::SERVER));
    client_options.curve = std::make_shared<const JobKeys>(curve->at(proto::WORKER));
    server_options.zmq_io_threads = client_options.zmq_io_threads = io_threads;
    client_options.connections_per_peer = connections;
  }
  auto server = Transport::Create(server_options);
  auto client = Transport::Create(client_options);
  CHECK(server.ok() && client.ok());
  server_ = *std::move(server);
  client_ = *std::move(client);
  handler_->Configure(0, ServerPeers{"", {client_->RoutingId()}}, *layout_);
  server_->Start(handler_.get());
  client_->Start(nullptr);
  PsClientOptions ps_options;
  ps_options.push_codec = push_codec;  // sparse: error feedback on (the default)
  ps_ = std::make_unique<PsClient>(client_.get(), layout_.get(),
                                   std::vector<std::string>{server_->endpoint()}, ps_options);
  CheckOk(ps_->Push(params_.data(), 0, /*init=*/true).Wait());
}

Ours::~Ours() {
  // Verify: what we pulled last is what the server holds (after one more pull if a push came
  // last: the bodies interleave), and updates were applied. fp32 pulls (fp32 and the sparse
  // codecs) must match bit for bit, fp16 ones after rounding. A sparse push moves only some
  // weights by their gradient, so no codec's weights are predicted here.
  if (pushed_since_pull_) Pull();
  const Partition& last = layout_->partitions().back();
  std::optional<std::vector<float>> held = handler_->Weights(last.key);
  CHECK(held.has_value());
  if (pull_codec_ == proto::FP16) {  // pulled rounded to fp16
    for (size_t i = 0; i < last.num_elements; ++i) {
      CHECK_EQ(codec::HalfToFloat(codec::FloatToHalf((*held)[i])), params_[last.offset + i]);
    }
  } else {
    CHECK_EQ(std::memcmp(held->data(), params_.data() + last.offset, last.bytes()), 0);
  }
  for (float w : params_) CHECK(std::isfinite(w));
  // On the server's (fp32) copy: a few small steps may not move an fp16 pull off 0.5.
  CHECK(std::any_of(held->begin(), held->end(), [](float w) { return w != 0.5f; }))
      << "updates were not applied";
  // Verify: the server took every push the client sent (the initial values and one per
  // partition each time), refused none, and counted the same bytes; a codec sent fewer.
  const PsClientCounters sent = ps_->counters();
  const proto::NodeCounters got = handler_->counters();
  CHECK_EQ(sent.pushes, layout_->partitions().size() * (1 + pushes_));
  CHECK_EQ(got.pushes(), sent.pushes);
  CHECK_EQ(got.bytes_pushed(), sent.bytes_pushed);
  CHECK_EQ(got.dropped_messages(), 0u);
  if (push_codec_.codec != proto::FP32) CHECK_LT(WireFraction(), 1.0);
  client_->Stop();
  server_->Stop();
}

void Ours::Push() {
  CheckOk(ps_->Push(grads_.data(), 0).Wait());
  ++pushes_;
  pushed_since_pull_ = true;
}

void Ours::Pull() {
  PullOptions options;
  options.codec = pull_codec_;
  CheckOk(ps_->Pull(params_.data(), options).Wait());
  pushed_since_pull_ = false;
}

double Ours::WireFraction() const {
  if (pushes_ == 0) return 1.0;
  const double dense = static_cast<double>(n_) * sizeof(float);
  const double grad_bytes = static_cast<double>(ps_->counters().bytes_pushed) - dense;
  return grad_bytes / static_cast<double>(pushes_) / dense;
}

}  // namespace r2sp::bench
