// Lazy bucketing: pushes a gradient's partitions while backward is still producing the rest.
// Backward reports finished ranges of the flat gradient (Workload's GradientReady), from the
// last layer to the first; a partition is complete once all of its values are, and complete
// partitions wait in a bucket until it holds `bucket_bytes` (fp32 bytes; 0: push each partition
// at once), then go out together (PsClient::PushPartition, asynchronous). Finish pushes what is
// left when backward has ended and waits for every push of the iteration. Fewer, larger
// messages cost less per byte; smaller buckets start sooner: the threshold trades the two.
// A gated iteration (r2sp: the push must wait for the worker's slot) holds complete partitions
// until Open, which sends them at once; after it the bucket works as above.
// With a pull (early pulls, where the compute reads a copy of the parameters: a GPU's), each
// partition is pulled once its push is acknowledged, into one whole-model pull (pulls()): at
// once, or with a limit of pulls in flight, as gated_pulls.h lets it.
#ifndef R2SP_WORKER_BUCKET_PUSHER_H_
#define R2SP_WORKER_BUCKET_PUSHER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/model_layout.h"
#include "worker/gated_pulls.h"
#include "worker/host_gradient.h"
#include "worker/ps_client.h"

namespace r2sp {

// Where an iteration's pulls go when each follows its partition's push.
struct PullAfterPush {
  float* params = nullptr;  // the flat model; REQUIRES: not read until pulls() is done
  PullOptions options;
};

// One training thread calls Start, Ready, BackwardEnded and Finish in turn, every iteration;
// Open may come from any thread (the slot grant's callback).
class BucketPusher {
 public:
  // Borrowed: ps outlives the pusher. `pulls_in_flight`: with a pull, at most this many
  // partitions' pulls in flight before every push of the iteration is acknowledged (0: each
  // pull as its push is acknowledged; gated_pulls.h).
  BucketPusher(PsClient* ps, size_t bucket_bytes, int pulls_in_flight = 0);

  // A new iteration's gradient, pushed as `clock` with `scale` (PsClient::Push's arguments);
  // `gated`: nothing goes out before Open; `pull`: each partition is pulled once its push is
  // acknowledged (GatedPulls).
  void Start(int64_t clock, float scale, bool gated = false,
             std::optional<PullAfterPush> pull = std::nullopt);
  // Backward finished [offset, offset + count) of `grads` (the flat gradient, which must stay
  // unchanged until Finish returns).
  void Ready(HostGradient grads, int64_t offset, int64_t count);
  // Opens the gate of a gated iteration: the complete partitions go out now. A no-op when not
  // started or open already.
  void Open();
  // Backward has ended: partitions that go out from now on are not counted as early.
  void BackwardEnded();
  // Pushes the partitions not sent yet from `grads` (all of them if Ready was never called, or
  // backward reported only part) and waits for the iteration's pushes; the first error.
  // Opens the gate.
  absl::Status Finish(HostGradient grads);

  // Ends a started iteration that will not be finished (an error stopped its compute): waits
  // for the pushes sent and for the pulls that followed them; nothing more is pushed.
  void Abandon();

  bool started() const;
  // The iteration's whole-model pull when Start had a pull (by key: Ticket::WaitKeys), from
  // Start until the next Start; nullopt otherwise. Done once every partition went out (Finish)
  // and came back.
  std::optional<Ticket> pulls() const;
  // This iteration: partitions whose push started before backward ended, and when the first
  // push of the iteration started.
  int early_partitions() const;
  absl::Time first_push() const;
  // This iteration's gate opened (Open) with every partition complete: the push then never
  // waited for backward, so its time from the grant is the transfer's alone.
  bool complete_when_opened() const;

 private:
  void Flush() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PushPartition(size_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  PsClient* const ps_;
  const size_t bucket_bytes_;
  GatedPulls gated_;  // the pushes and their pulls, with a pull
  mutable absl::Mutex mu_;
  // Values not yet ready, per partition (layout order); 0: complete, in the bucket or pushed.
  std::vector<size_t> remaining_ ABSL_GUARDED_BY(mu_);
  // Complete partitions waiting for the threshold (or the gate).
  std::vector<size_t> bucket_ ABSL_GUARDED_BY(mu_);
  size_t bucket_size_ ABSL_GUARDED_BY(mu_) = 0;  // their fp32 bytes
  std::vector<Ticket> tickets_ ABSL_GUARDED_BY(mu_);
  HostGradient grads_ ABSL_GUARDED_BY(mu_);  // as the last Ready gave it
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool open_ ABSL_GUARDED_BY(mu_) = true;
  bool backward_ended_ ABSL_GUARDED_BY(mu_) = false;
  bool complete_when_opened_ ABSL_GUARDED_BY(mu_) = false;
  int64_t clock_ ABSL_GUARDED_BY(mu_) = 0;
  float scale_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<PullAfterPush> pull_ ABSL_GUARDED_BY(mu_);
  std::optional<Ticket> pulls_ ABSL_GUARDED_BY(mu_);  // with pull_
  int early_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time first_push_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace r2sp

#endif  // R2SP_WORKER_BUCKET_PUSHER_H_
