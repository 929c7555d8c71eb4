// See ps_client.h.
#include "worker/ps_client.h"

#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/codec/csc.h"
#include "common/wire/pull_frames.h"
#include "common/wire/push_frames.h"
#include "glog/logging.h"

namespace r2sp {

namespace {

// The tensors of fewer than `below` values that lie in `p`, as ranges of the partition.
std::vector<std::pair<uint32_t, uint32_t>> DenseRanges(const ModelLayout& layout,
                                                       const Partition& p, size_t below) {
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  for (const TensorInfo& t : layout.tensors()) {
    if (t.num_elements >= below || t.offset < p.offset ||
        t.offset + t.num_elements > p.offset + p.num_elements) {
      continue;  // large, or not (wholly) in this partition
    }
    ranges.emplace_back(static_cast<uint32_t>(t.offset - p.offset),
                        static_cast<uint32_t>(t.offset - p.offset + t.num_elements));
  }
  return ranges;
}

}  // namespace

PsClient::PsClient(Requester* requester, const ModelLayout* layout,
                   std::vector<std::string> server_endpoints, const PsClientOptions& options)
    : requester_(requester),
      layout_(layout),
      options_(options),
      retries_(options.server_retry > absl::ZeroDuration() ? std::make_unique<DelayedCalls>()
                                                            : nullptr),
      push_density_(options.push_codec.ratio),
      delta_seq_(std::make_unique<std::atomic<uint64_t>[]>(layout->partitions().size())),
      pulled_steps_(std::make_unique<std::atomic<double>[]>(layout->partitions().size())),
      nonzero_rows_(std::make_unique<std::atomic<bool>[]>(layout->partitions().size())) {
  CHECK_EQ(static_cast<int>(server_endpoints.size()), layout_->num_servers());
  for (const std::string& server : server_endpoints) requester_->ExpectPeer(server, proto::SERVER);
  servers_ = std::move(server_endpoints);
  if (options.push_codec.sparse()) {
    codec::SparseEncoderOptions encoder;
    encoder.spec = options.push_codec;
    encoder.error_feedback = options.error_feedback;
    encoder.momentum_correction = options.momentum_correction;
    for (const Partition& p : layout_->partitions()) {
      encoder.dense = DenseRanges(*layout_, p, options.dense_below);
      encoders_.push_back(std::make_unique<SparsePartition>(p.num_elements, encoder));
    }
  }
}

void PsClient::set_push_density(double density) {
  CHECK(density > 0.0 && density <= 1.0) << density;
  push_density_.store(density);
}

PsClientCounters PsClient::counters() const {
  return {bytes_pushed_.load(), bytes_pulled_.load(), pushes_.load(), pulls_.load(),
          retried_.load(), rolled_back_steps_.load()};
}

void PsClient::SetServerEndpoint(int rank, const std::string& endpoint) {
  requester_->ExpectPeer(endpoint, proto::SERVER);
  absl::MutexLock lock(&servers_mu_);
  CHECK(rank >= 0 && rank < static_cast<int>(servers_.size())) << rank;
  servers_[rank] = endpoint;
}

std::string PsClient::ServerEndpoint(int rank) const {
  absl::MutexLock lock(&servers_mu_);
  return servers_[rank];
}

void PsClient::Send(int rank, Message request, ReplyCallback done) {
  request.header.set_to_server(rank);
  SendAttempt(rank, std::move(request), absl::Now(), 0, std::move(done));
}

void PsClient::SendAttempt(int rank, Message request, absl::Time first_try, int attempt,
                           ReplyCallback done) {
  if (retries_ == nullptr) {
    requester_->Request(ServerEndpoint(rank), std::move(request), options_.request_timeout,
                        std::move(done));
    return;
  }
  // Kept for a retry: the header and the frames (copies share the data, no bytes are copied;
  // sparse pushes must not be encoded twice, as encoding moves the residual on).
  auto spare = std::make_shared<Message>();
  spare->header = request.header;
  for (zmq::message_t& frame : request.payload) spare->payload.emplace_back().copy(frame);
  requester_->Request(
      ServerEndpoint(rank), std::move(request), options_.request_timeout,
      [this, rank, spare, first_try, attempt, done](absl::StatusOr<Message> reply) {
        const absl::Status status = reply.ok() ? FromReplyHeader(reply->header) : reply.status();
        if (!absl::IsUnavailable(status) || absl::Now() - first_try >= options_.server_retry) {
          done(std::move(reply));
          return;
        }
        VLOG(1) << "server " << rank << ": " << status << "; retrying";
        ++retried_;
        const absl::Duration backoff =
            std::min(absl::Milliseconds(50) * (1 << std::min(attempt, 5)), absl::Seconds(1));
        if (spare->header.type() == proto::PUSH) spare->header.mutable_push()->set_retry(true);
        retries_->After(backoff, [this, rank, spare, first_try, attempt, done] {
          SendAttempt(rank, std::move(*spare), first_try, attempt + 1, done);
        });
      });
}

Ticket PsClient::Push(HostGradient grads, int64_t clock, bool init, float scale) {
  auto state = std::make_shared<Ticket::State>(static_cast<int>(layout_->partitions().size()));
  for (const Partition& p : layout_->partitions()) {
    SendPush(p, grads.At(p.offset), clock, init, scale, CompleteOn(state));
  }
  return Ticket(std::move(state));
}

PsClient::Exchange PsClient::PushThenPull(HostGradient grads, int64_t clock, float scale,
                                          float* params, const PullOptions& pull) {
  const int n = static_cast<int>(layout_->partitions().size());
  auto pushed = std::make_shared<Ticket::State>(n);
  auto pulled = std::make_shared<Ticket::State>(n, /*by_key=*/true);
  for (const Partition& p : layout_->partitions()) {
    SendPush(p, grads.At(p.offset), clock, /*init=*/false, scale,
             ThenPull(p, params, pull, pushed, pulled));
  }
  return Exchange{Ticket(std::move(pushed)), Ticket(std::move(pulled))};
}

Ticket PsClient::PullGroup() const {
  return Ticket(std::make_shared<Ticket::State>(
      static_cast<int>(layout_->partitions().size()), /*by_key=*/true));
}

std::function<void(const absl::Status&)> PsClient::ThenPull(
    const Partition& p, float* params, const PullOptions& pull,
    std::shared_ptr<Ticket::State> pushed, std::shared_ptr<Ticket::State> pulled) {
  return [this, partition = &p, params, pull, pushed = std::move(pushed),
          pulled = std::move(pulled)](const absl::Status& status) {
    Ticket::Complete(*pushed, status);
    if (status.ok()) {
      SendPull(*partition, params + partition->offset, pull, pulled);
    } else {
      AbortPull(Ticket(pulled), partition->key);
    }
  };
}

Ticket PsClient::PushPartitionThen(uint64_t key, HostGradient data, int64_t clock, float scale,
                                   std::function<void(const absl::Status&)> acked) {
  const Partition* p = layout_->Find(key);
  CHECK(p != nullptr) << "unknown key " << key;
  auto state = std::make_shared<Ticket::State>(1);
  SendPush(*p, data, clock, /*init=*/false, scale,
           [state, acked = std::move(acked)](const absl::Status& status) {
             acked(status);
             Ticket::Complete(*state, status);
           });
  return Ticket(std::move(state));
}

void PsClient::PullPartition(uint64_t key, float* params, const PullOptions& pull,
                             const Ticket& pulls, std::function<void()> landed) {
  const Partition* p = layout_->Find(key);
  CHECK(p != nullptr) << "unknown key " << key;
  CHECK(pulls.state_ != nullptr) << "PullPartition into a ticket not from PullGroup";
  SendPull(*p, params + p->offset, pull, pulls.state_, std::move(landed));
}

void PsClient::AbortPull(const Ticket& pulls, uint64_t key) {
  Ticket::Complete(*pulls.state_,
                   absl::AbortedError(absl::StrCat("not pulled: the push of key ", key, " failed")),
                   0, -1, -1, static_cast<int64_t>(key));
}

std::function<void(const absl::Status&)> PsClient::CompleteOn(
    std::shared_ptr<Ticket::State> state) {
  return [state = std::move(state)](const absl::Status& status) {
    Ticket::Complete(*state, status);
  };
}

Ticket PsClient::PushPartition(uint64_t key, HostGradient data, int64_t clock, bool init,
                               float scale) {
  const Partition* p = layout_->Find(key);
  CHECK(p != nullptr) << "unknown key " << key;
  auto state = std::make_shared<Ticket::State>(1);
  SendPush(*p, data, clock, init, scale, CompleteOn(state));
  return Ticket(std::move(state));
}

Ticket PsClient::Pull(float* params, const PullOptions& options) {
  auto state = std::make_shared<Ticket::State>(static_cast<int>(layout_->partitions().size()),
                                               /*by_key=*/true);
  for (const Partition& p : layout_->partitions()) {
    SendPull(p, params + p.offset, options, state);
  }
  return Ticket(std::move(state));
}

void PsClient::SendPush(const Partition& p, HostGradient data, int64_t clock, bool init,
                        float scale, std::function<void(const absl::Status&)> done) {
  last_push_thread_ = static_cast<uint64_t>(pthread_self());
  const proto::Codec codec = init ? proto::FP32 : options_.push_codec.codec;
  if (data.fp16 != nullptr && codec != proto::FP16) {
    const std::string why = init ? "is an init push, which is fp32"
                                 : absl::StrCat("has push codec ", proto::Codec_Name(codec));
    done(absl::InvalidArgumentError(absl::StrCat(
        "a gradient encoded to fp16 already goes only in an fp16 push; key ", p.key, " ", why)));
    return;
  }
  const wire::PushFields fields{p.key, options_.rank, clock, init, scale};
  Message request;
  if (!init && clock == skip_clock_.load()) {
    request = wire::EncodeSkipPush(fields);
  } else if (data.fp16 != nullptr) {
    request = wire::EncodeEncodedFp16Push(fields, data.fp16, p.num_elements);
  } else if (codec == proto::FP16 || codec == proto::FP32) {
    request = init ? wire::EncodeFp32Push(fields, data.fp32, p.num_elements)
                   : EncodeDense(p, data.fp32, fields, codec);
  } else {
    request = EncodeSparse(p, data.fp32, fields);
  }
  if (!init) {
    std::shared_ptr<const std::vector<proto::PartitionOptimizer>> optimizer;
    {
      absl::MutexLock lock(&optimizer_mu_);
      optimizer = optimizer_;
    }
    if (optimizer != nullptr) {
      *request.header.mutable_push()->mutable_optimizer() = (*optimizer)[p.key];
    }
  }
  const size_t bytes = PayloadBytes(request);
  Send(p.server, std::move(request),
       [this, bytes, done = std::move(done)](absl::StatusOr<Message> reply) {
         absl::Status status = reply.ok() ? FromReplyHeader(reply->header) : reply.status();
         if (status.ok()) {
           bytes_pushed_ += bytes;
           ++pushes_;
         }
         done(status);
       });
}

void PsClient::SetOptimizer(std::vector<proto::PartitionOptimizer> by_key) {
  CHECK_EQ(by_key.size(), layout_->partitions().size()) << "one optimizer per partition";
  auto shared = std::make_shared<const std::vector<proto::PartitionOptimizer>>(std::move(by_key));
  absl::MutexLock lock(&optimizer_mu_);
  optimizer_ = std::move(shared);
}

void PsClient::TakeSparseResiduals(float* out) {
  CHECK(sparse_pushes()) << "TakeSparseResiduals without a sparse push codec";
  for (const Partition& p : layout_->partitions()) {
    encoders_[p.key]->encoder.TakeResidual(out + p.offset);
  }
}

Message PsClient::EncodeSparse(const Partition& p, const float* data,
                               const wire::PushFields& fields) {
  SparsePartition& partition = *encoders_[p.key];  // key == index in the layout
  codec::SparseGradient& encoded = partition.scratch;
  partition.encoder.Encode(data, push_density_.load(), &encoded);
  return wire::EncodeSparsePush(fields, options_.push_codec, encoded);
}

void PsClient::PushNonzeroRowsOf(size_t offset, size_t count) {
  for (const Partition& p : layout_->partitions()) {
    if (p.offset < offset + count && offset < p.offset + p.num_elements) {
      nonzero_rows_[p.key] = true;
    }
  }
}

Message PsClient::EncodeDense(const Partition& p, const float* data,
                              const wire::PushFields& fields, proto::Codec codec) {
  if (nonzero_rows_[p.key].load(std::memory_order_relaxed)) {
    std::vector<uint32_t> ids;
    const size_t half = codec::NumChunks(p.num_elements, kRowChunk) / 2;
    if (codec::SelectNonzeroChunks(data, p.num_elements, kRowChunk, half, &ids)) {
      return wire::EncodeChunksPush(fields, data, p.num_elements, kRowChunk, ids,
                                    codec == proto::FP16);
    }
  }
  return codec == proto::FP16 ? wire::EncodeFp16Push(fields, data, p.num_elements)
                              : wire::EncodeFp32Push(fields, data, p.num_elements);
}

void PsClient::SendPull(const Partition& p, float* data, const PullOptions& options,
                        std::shared_ptr<Ticket::State> state, std::function<void()> then) {
  wire::PullRequest wanted;
  wanted.key = p.key;
  wanted.rank = options_.rank;
  wanted.min_version = options.min_version;
  wanted.min_clock = options.min_clock;
  wanted.predict_fraction = options.predict_fraction;
  wanted.predict_updates = options.predict_updates;
  wanted.codec = options.codec;
  std::atomic<uint64_t>& copy_seq = delta_seq_[p.key];
  if (options.codec == proto::FP16_DELTA) wanted.delta_base = copy_seq.load();
  copy_seq = 0;  // until the reply says which copy `data` holds
  Message request = wire::EncodePull(wanted);
  wire::PullAsked asked;
  asked.key = p.key;
  asked.num_elements = p.num_elements;
  asked.codec = options.codec;
  asked.delta_base = wanted.delta_base;
  std::atomic<double>& steps_seen = pulled_steps_[p.key];
  Send(
      p.server, std::move(request),
      [this, asked, data, state, &copy_seq, &steps_seen,
       then = std::move(then)](absl::StatusOr<Message> reply) {
        absl::StatusOr<wire::PulledPartition> pulled =
            reply.ok() ? wire::DecodePullReply(*reply, asked, data) : reply.status();
        if (!pulled.ok()) {
          Ticket::Complete(*state, pulled.status(), 0, -1, -1, asked.key);
          if (then) then();
          return;
        }
        const double before = steps_seen.exchange(pulled->steps);
        if (pulled->restored_steps > 0 && pulled->steps < before) {
          // The partition's server was replaced from a checkpoint (its steps only grow else).
          double most = rolled_back_steps_.load();
          while (before - pulled->steps > most &&
                 !rolled_back_steps_.compare_exchange_weak(most, before - pulled->steps)) {
          }
        }
        copy_seq = pulled->delta_seq;
        bytes_pulled_ += pulled->bytes;
        ++pulls_;
        Ticket::Complete(*state, absl::OkStatus(), pulled->waited_seconds, pulled->steps,
                         pulled->restored_steps, asked.key);
        if (then) then();
      });
}

}  // namespace r2sp
