// Lazy bucketing: pushes a gradient's partitions while backward is still producing the rest.
// Backward reports finished ranges of the flat gradient (Workload's GradientReady), from the
// last layer to the first; a partition is complete once all of its values are, and complete
// partitions wait in a bucket until it holds `bucket_bytes` (fp32 bytes; 0: push each partition
// at once), then go out together (PsClient::PushPartition, asynchronous). Finish pushes what is
// left when backward has ended and waits for every push of the iteration. Fewer, larger
// messages cost less per byte; smaller buckets start sooner: the threshold trades the two.
#ifndef R2SP_WORKER_BUCKET_PUSHER_H_
#define R2SP_WORKER_BUCKET_PUSHER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/model_layout.h"
#include "worker/ps_client.h"

namespace r2sp {

// One training thread uses it (Start, Ready and Finish in turn, every iteration).
class BucketPusher {
 public:
  // Borrowed: ps outlives the pusher.
  BucketPusher(PsClient* ps, size_t bucket_bytes);

  // A new iteration's gradient, pushed as `clock` with `scale` (PsClient::Push's arguments).
  void Start(int64_t clock, float scale);
  // Backward finished [offset, offset + count) of `grads` (the flat gradient, which must stay
  // unchanged until Finish returns).
  void Ready(const float* grads, int64_t offset, int64_t count);
  // Pushes the partitions not sent yet from `grads` (all of them if Ready was never called, or
  // backward reported only part) and waits for the iteration's pushes; the first error.
  absl::Status Finish(const float* grads);

  bool started() const { return started_; }
  // This iteration: partitions whose push started before Finish, and when the first one did.
  int early_partitions() const { return early_; }
  absl::Time first_push() const { return first_push_; }

 private:
  void Flush(const float* grads);
  void PushPartition(const float* grads, size_t index);

  PsClient* const ps_;
  const size_t bucket_bytes_;
  // Values not yet ready, per partition (layout order); 0: complete, in the bucket or pushed.
  std::vector<size_t> remaining_;
  std::vector<size_t> bucket_;     // complete partitions waiting for the threshold
  size_t bucket_size_ = 0;         // their fp32 bytes
  std::vector<Ticket> tickets_;
  bool started_ = false;
  int64_t clock_ = 0;
  float scale_ = 0;
  int early_ = 0;
  absl::Time first_push_ = absl::InfinitePast();
};

}  // namespace r2sp

#endif  // R2SP_WORKER_BUCKET_PUSHER_H_
