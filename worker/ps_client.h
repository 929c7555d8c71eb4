// The worker's parameter-server client (cf. ps-lite's KVWorker): asynchronous Push (of the whole
// model or single partitions) and Pull (of the whole model), each returning a Ticket to Wait()
// on. Requests for all partitions go out at once, to every server in parallel; their frames are
// encoded and decoded by common/wire.
#ifndef R2SP_WORKER_PS_CLIENT_H_
#define R2SP_WORKER_PS_CLIENT_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/codec/codec_spec.h"
#include "common/codec/sparse_encoder.h"
#include "common/wire/push_frames.h"
#include "worker/host_gradient.h"
#include "common/delayed_calls.h"
#include "common/model_layout.h"
#include "common/handler.h"

namespace r2sp {

// Completion of a group of requests. Copyable handle; thread-safe.
class Ticket {
 public:
  Ticket() = default;
  // Blocks until every request of the group is answered; the first error, if any.
  absl::Status Wait() const;
  bool Done() const;
  // Blocks up to `timeout` for the whole group: whether it is done (then Wait() returns at once).
  bool WaitFor(absl::Duration timeout) const;
  // A whole-model pull (Pull, PushThenPull's): blocks until the partitions with keys
  // [first, last] are answered, or any request of the group failed; the first error, if any.
  // Other tickets: as Wait.
  absl::Status WaitKeys(uint64_t first, uint64_t last) const;
  // When the last request was answered (InfinitePast until then).
  absl::Time finished() const;
  // The longest any reply of the group said it was parked on a server (BSP/SSP waits).
  double waited_seconds() const;
  // Pulls: the fewest global-batch steps any pulled partition had had, and the fewest its
  // restored checkpoint held (proto PullReply; 0 for pushes).
  double min_steps() const;
  double min_restored_steps() const;

 private:
  friend class PsClient;
  struct State {
    // `by_key`: the group is one request per partition, key k the k-th (WaitKeys).
    explicit State(int n, bool by_key = false) : outstanding(n), answered(by_key ? n : 0) {}
    mutable absl::Mutex mu;
    int outstanding ABSL_GUARDED_BY(mu);
    std::vector<bool> answered ABSL_GUARDED_BY(mu);  // by key, with by_key
    int failed ABSL_GUARDED_BY(mu) = 0;
    absl::Time finished ABSL_GUARDED_BY(mu) = absl::InfinitePast();
    absl::Status status ABSL_GUARDED_BY(mu);
    double waited ABSL_GUARDED_BY(mu) = 0;
    double min_steps ABSL_GUARDED_BY(mu) = -1;  // -1: no pull reply yet
    double min_restored_steps ABSL_GUARDED_BY(mu) = -1;
  };
  explicit Ticket(std::shared_ptr<State> state) : state_(std::move(state)) {}
  // One request of the group answered (`key`: which partition's, for by_key groups).
  static void Complete(State& state, const absl::Status& status, double waited = 0,
                       double steps = -1, double restored_steps = -1, int64_t key = -1);

  std::shared_ptr<State> state_;
};

struct PsClientOptions {
  int rank = 0;  // this worker's rank
  absl::Duration request_timeout = absl::Seconds(120);
  // How gradient pushes travel (initial values always go as fp32).
  codec::CodecSpec push_codec;
  // Sparse push codecs (topk, csc): keep what was not sent for the next push (error feedback),
  // and DGC momentum correction (0 = off); see common/codec/sparse_encoder.h.
  bool error_feedback = true;
  float momentum_correction = 0.0f;
  // Sparse codecs: tensors of fewer values than this go whole in every push (top-k), or the
  // chunks that hold them (csc); SparseEncoderOptions::dense. 0: none.
  size_t dense_below = 0;
  // A request a server answers UNAVAILABLE (its connection was reset because the server was
  // lost, or its replacement is not serving yet) is sent again, with backoff, until this long
  // after its first try (the job's --server_replace_s and then some). Zero: never.
  absl::Duration server_retry = absl::ZeroDuration();
};

struct PsClientCounters {  // bytes as they travelled (encoded)
  uint64_t bytes_pushed = 0;
  uint64_t bytes_pulled = 0;
  uint64_t pushes = 0;
  uint64_t pulls = 0;
  uint64_t retries = 0;  // requests sent again (server_retry)
  // The most global-batch steps a pulled partition went back (its server was replaced from a
  // checkpoint): steps in the last reply before less steps in the first restored one.
  double rolled_back_steps = 0;
};

struct PullOptions {
  int64_t min_version = 0;  // BSP: each partition at least at this many clocks applied
  int64_t min_clock = 0;    // SSP: once every live worker pushed it this many times
  // Asynchronous modes: the weights predicted for after `predict_updates` more pushes carrying
  // `predict_fraction` of a global-batch step between them (r2sp delay compensation;
  // proto PullInfo). 0: the current weights.
  float predict_fraction = 0.0f;
  int predict_updates = 0;
  // The encoding the server answers with: FP32, FP16 (the weights rounded to binary16) or
  // FP16_DELTA (binary16 differences to the copy the previous FP16_DELTA pull of the partition
  // left in the buffer; the first such pull, and any the server cannot answer that way, get the
  // whole weights in fp32). REQUIRES for FP16_DELTA: every pull of a partition lands in the same
  // buffer, which nothing else writes.
  proto::Codec codec = proto::FP32;
};

// Thread-safety: all methods may be called from any thread.
// Borrowed: requester (the worker's transport, or a test's in-process network) and layout
// outlive the client.
class PsClient {
 public:
  PsClient(Requester* requester, const ModelLayout* layout,
           std::vector<std::string> server_endpoints, const PsClientOptions& options);

  // Pushes the gradient of every partition from the flat model `grads`
  // (layout.total_elements() floats), tagged with `clock`. `init` sets initial values instead.
  // `scale` > 0 weights the gradient on the server (heterogeneity-aware batching: b_i / B).
  // Gradients go in options.push_codec. An fp16 view (encoded already, on a device) goes only
  // with the fp16 push codec, and not as init; otherwise the ticket carries InvalidArgument.
  // REQUIRES: grads stays valid and unchanged until the ticket is done (fp32, and fp16 encoded
  // already, are sent zero-copy; other codecs encode before Push returns).
  // Pushes of one partition must not run concurrently.
  Ticket Push(HostGradient grads, int64_t clock, bool init = false, float scale = 0.0f);
  Ticket PushPartition(uint64_t key, HostGradient data, int64_t clock, bool init = false,
                       float scale = 0.0f);

  // A training step's exchange: pushes every partition's gradient (as Push, not init) and
  // pulls each partition into `params` (as Pull) as soon as its push is acknowledged, so one
  // partition's pull overlaps the pushes of the next ones (and on a full-duplex link the two
  // directions carry traffic at once). `push` completes with the pushes, `pull` with the pulls;
  // a partition whose push fails is not pulled (`pull` carries an error for it).
  // REQUIRES: as Push for `grads`, as Pull for `params`; grads and params do not overlap.
  struct Exchange {
    Ticket push;
    Ticket pull;
  };
  Exchange PushThenPull(HostGradient grads, int64_t clock, float scale, float* params,
                        const PullOptions& pull);
  // The same partition by partition, as backward completes them (BucketPusher, through
  // gated_pulls.h): PullGroup is a whole-model pull with nothing sent yet (WaitKeys works on
  // it as on Pull's); PushPartitionThen pushes as PushPartition does (not init), its ticket
  // done once `acked` has had the outcome; PullPartition pulls partition `key` into `params`
  // (the flat model) as part of `pulls` and calls `landed` once it is answered; AbortPull
  // answers that partition of `pulls` Aborted instead, its push having failed.
  // REQUIRES: each partition of a group pulled or aborted once, or `pulls` is never done.
  Ticket PullGroup() const;
  Ticket PushPartitionThen(uint64_t key, HostGradient data, int64_t clock, float scale,
                           std::function<void(const absl::Status&)> acked);
  void PullPartition(uint64_t key, float* params, const PullOptions& pull, const Ticket& pulls,
                     std::function<void()> landed);
  static void AbortPull(const Ticket& pulls, uint64_t key);

  // Pulls every partition into the flat model `params` (see PullOptions).
  // REQUIRES: params stays valid and is not read until the ticket is done.
  Ticket Pull(float* params, const PullOptions& options = {});

  // The training script's optimizer (wire::EncodeOptimizerRuns, indexed by key): every
  // gradient push from now on carries its partition's runs, which the server applies instead
  // of its own optimizer. REQUIRES: one entry per partition of the layout.
  void SetOptimizer(std::vector<proto::PartitionOptimizer> by_key)
      ABSL_LOCKS_EXCLUDED(optimizer_mu_);

  // The gradient pushes of `clock` skip it (proto PushInfo.skip: they carry no values and the
  // servers apply nothing of this worker's for it): the script found an inf or NaN.
  void SkipPushesOf(int64_t clock) { skip_clock_ = clock; }

  // The tensor at [offset, offset + count) of the flat model gets gradients that leave most of
  // its rows zero (an embedding's sparse gradient): the fp32 and fp16 pushes of the partitions
  // it lies in send only the chunks of kRowChunk values holding a value other than zero (a
  // lossless csc push), unless more than half of a partition's chunks do. Any thread, any time;
  // pushes begun after it returns follow it.
  void PushNonzeroRowsOf(size_t offset, size_t count);
  static constexpr uint32_t kRowChunk = 64;

  // Sparse push codecs: the fraction of values (topk) or chunks (csc) the next pushes send,
  // in (0, 1] (a density warm-up lowers it to the codec's ratio). Starts at the codec's ratio.
  void set_push_density(double density);

  // Whether pushes go in a sparse codec (topk, csc), each partition through its encoder.
  bool sparse_pushes() const { return !encoders_.empty(); }
  // Sparse push codecs with error feedback: copies what every partition's encoder holds back
  // into the flat model `out` (the model's size) and clears it. Right after a Push whose
  // encoders held nothing, `out` is the part of it not sent (elastic averaging's worker keeps
  // that part: elastic_exchange.h). REQUIRES: sparse_pushes(); no push runs concurrently.
  void TakeSparseResiduals(float* out);

  PsClientCounters counters() const;
  const ModelLayout& layout() const { return *layout_; }
  // The thread (pthread_self) that sent the last push: where the caller's exchange ran.
  uint64_t last_push_thread() const { return last_push_thread_.load(); }

  // Server `rank` is now at `endpoint` (a replacement of a lost server): requests from now on,
  // retries included, go there.
  void SetServerEndpoint(int rank, const std::string& endpoint) ABSL_LOCKS_EXCLUDED(servers_mu_);
  std::string ServerEndpoint(int rank) const ABSL_LOCKS_EXCLUDED(servers_mu_);

 private:
  // Sends `request` to server `rank`; with options_.server_retry, an UNAVAILABLE answer sends
  // it again after a backoff while the retry time lasts. `done` gets the last answer.
  void Send(int rank, Message request, ReplyCallback done);
  void SendAttempt(int rank, Message request, absl::Time first_try, int attempt,
                   ReplyCallback done);
  // Sends partition `p`'s push; `done` gets its outcome (on the requester's reply thread).
  void SendPush(const Partition& p, HostGradient data, int64_t clock, bool init, float scale,
                std::function<void(const absl::Status&)> done);
  static std::function<void(const absl::Status&)> CompleteOn(
      std::shared_ptr<Ticket::State> state);
  // A push's `done` that completes `pushed` and then pulls partition `p` into `params` (the flat
  // model) as part of `pulled`, or answers it Aborted when the push failed.
  std::function<void(const absl::Status&)> ThenPull(const Partition& p, float* params,
                                                    const PullOptions& pull,
                                                    std::shared_ptr<Ticket::State> pushed,
                                                    std::shared_ptr<Ticket::State> pulled);
  // A sparse push of partition `p` (encoded by its SparseEncoder, which moves its residual on).
  Message EncodeSparse(const Partition& p, const float* data, const wire::PushFields& fields);
  // An fp32 or fp16 (`codec`) push of partition `p`'s values `data`: its non-zero chunks alone
  // where PushNonzeroRowsOf asked for it and they are at most half, otherwise all of it.
  Message EncodeDense(const Partition& p, const float* data, const wire::PushFields& fields,
                      proto::Codec codec);
  // `then`, if any, runs once the pull is answered (after `state` is completed).
  void SendPull(const Partition& p, float* data, const PullOptions& options,
                std::shared_ptr<Ticket::State> state, std::function<void()> then = nullptr);

  Requester* const requester_;
  const ModelLayout* const layout_;
  mutable absl::Mutex servers_mu_;
  std::vector<std::string> servers_ ABSL_GUARDED_BY(servers_mu_);  // by rank
  const PsClientOptions options_;
  std::unique_ptr<DelayedCalls> retries_;  // with options_.server_retry
  // Sparse codecs, per partition (indexed by key): the encoder with its residual, and the
  // encoded push, reused (the frames are copies of it).
  struct SparsePartition {
    SparsePartition(size_t n, const codec::SparseEncoderOptions& options) : encoder(n, options) {}
    codec::SparseEncoder encoder;
    codec::SparseGradient scratch;
  };
  std::vector<std::unique_ptr<SparsePartition>> encoders_;
  std::atomic<double> push_density_;
  // FP16_DELTA pulls, per partition (by key): the sequence of the copy the last pull of that
  // partition left in its buffer (0: none; any other pull resets it).
  std::unique_ptr<std::atomic<uint64_t>[]> delta_seq_;
  // Per partition (by key), the global-batch steps of its latest pull reply.
  std::unique_ptr<std::atomic<double>[]> pulled_steps_;
  std::atomic<double> rolled_back_steps_{0};
  std::atomic<int64_t> skip_clock_{-1};  // SkipPushesOf's
  std::unique_ptr<std::atomic<bool>[]> nonzero_rows_;  // PushNonzeroRowsOf's, by key
  mutable absl::Mutex optimizer_mu_;
  // SetOptimizer's runs (null: none), shared with the pushes under way.
  std::shared_ptr<const std::vector<proto::PartitionOptimizer>> optimizer_
      ABSL_GUARDED_BY(optimizer_mu_);
  std::atomic<uint64_t> last_push_thread_{0};
  std::atomic<uint64_t> bytes_pushed_{0}, bytes_pulled_{0}, pushes_{0}, pulls_{0},
      retried_{0};
};

}  // namespace r2sp

#endif  // R2SP_WORKER_PS_CLIENT_H_
