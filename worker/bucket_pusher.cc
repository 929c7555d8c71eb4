// See bucket_pusher.h.
#include "worker/bucket_pusher.h"

#include <algorithm>

#include "absl/time/clock.h"
#include "glog/logging.h"

namespace r2sp {

BucketPusher::BucketPusher(PsClient* ps, size_t bucket_bytes, int pulls_in_flight)
    : ps_(ps), bucket_bytes_(bucket_bytes), gated_(ps, pulls_in_flight) {
  const std::vector<Partition>& parts = ps->layout().partitions();
  for (size_t i = 1; i < parts.size(); ++i) {
    CHECK_EQ(parts[i].offset, parts[i - 1].offset + parts[i - 1].num_elements)
        << "partitions must tile the flat model in order";
  }
}

void BucketPusher::Start(int64_t clock, float scale, bool gated,
                         std::optional<PullAfterPush> pull) {
  absl::MutexLock lock(&mu_);
  const std::vector<Partition>& parts = ps_->layout().partitions();
  remaining_.resize(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) remaining_[i] = parts[i].num_elements;
  bucket_.clear();
  bucket_size_ = 0;
  tickets_.clear();
  grads_ = HostGradient();
  started_ = true;
  open_ = !gated;
  backward_ended_ = false;
  complete_when_opened_ = false;
  clock_ = clock;
  scale_ = scale;
  pull_ = pull;
  pulls_.reset();
  if (pull_.has_value()) {
    pulls_ = ps_->PullGroup();
    gated_.Start(parts.size(), pull_->params, pull_->options, *pulls_);
  }
  early_ = 0;
  first_push_ = absl::InfinitePast();
}

void BucketPusher::Ready(HostGradient grads, int64_t offset, int64_t count) {
  absl::MutexLock lock(&mu_);
  if (!started_ || count <= 0) return;
  grads_ = grads;
  const std::vector<Partition>& parts = ps_->layout().partitions();
  const size_t begin = static_cast<size_t>(offset), end = begin + static_cast<size_t>(count);
  // The first partition that ends after `begin`.
  size_t i = std::upper_bound(parts.begin(), parts.end(), begin,
                              [](size_t at, const Partition& p) {
                                return at < p.offset + p.num_elements;
                              }) -
             parts.begin();
  for (; i < parts.size() && parts[i].offset < end; ++i) {
    const size_t lo = std::max(begin, parts[i].offset);
    const size_t hi = std::min(end, parts[i].offset + parts[i].num_elements);
    DCHECK_LE(hi - lo, remaining_[i]) << "a gradient value reported twice";
    if (remaining_[i] == 0) continue;  // complete already (a value reported twice)
    remaining_[i] -= std::min(remaining_[i], hi - lo);
    if (remaining_[i] == 0) {
      bucket_.push_back(i);
      bucket_size_ += parts[i].bytes();
    }
  }
  if (open_ && !bucket_.empty() && bucket_size_ >= bucket_bytes_) Flush();
}

void BucketPusher::Open() {
  absl::MutexLock lock(&mu_);
  if (!started_ || open_) return;
  open_ = true;
  complete_when_opened_ =
      std::all_of(remaining_.begin(), remaining_.end(), [](size_t left) { return left == 0; });
  Flush();
}

void BucketPusher::BackwardEnded() {
  absl::MutexLock lock(&mu_);
  backward_ended_ = true;
}

void BucketPusher::Flush() {
  if (!backward_ended_) early_ += static_cast<int>(bucket_.size());
  for (size_t index : bucket_) PushPartition(index);
  bucket_.clear();
  bucket_size_ = 0;
}

void BucketPusher::PushPartition(size_t index) {
  if (first_push_ == absl::InfinitePast()) first_push_ = absl::Now();
  const Partition& p = ps_->layout().partitions()[index];
  tickets_.push_back(pull_.has_value()
                         ? gated_.Push(p.key, grads_.At(p.offset), clock_, scale_)
                         : ps_->PushPartition(p.key, grads_.At(p.offset), clock_,
                                              /*init=*/false, scale_));
}

absl::Status BucketPusher::Finish(HostGradient grads) {
  std::vector<Ticket> tickets;
  {
    absl::MutexLock lock(&mu_);
    CHECK(started_) << "BucketPusher::Finish without Start";
    started_ = false;
    open_ = true;
    backward_ended_ = true;
    grads_ = grads;
    Flush();
    for (size_t i = 0; i < remaining_.size(); ++i) {
      if (remaining_[i] != 0) PushPartition(i);  // backward never reported all of it
    }
    tickets.swap(tickets_);
  }
  absl::Status status;
  for (const Ticket& t : tickets) status.Update(t.Wait());
  return status;
}

void BucketPusher::Abandon() {
  std::vector<Ticket> tickets;
  std::vector<uint64_t> keys;  // of the partitions pushed: complete, and out of the bucket
  std::optional<Ticket> pulls;
  {
    absl::MutexLock lock(&mu_);
    if (!started_) return;
    started_ = false;
    tickets.swap(tickets_);
    const std::vector<Partition>& parts = ps_->layout().partitions();
    for (size_t i = 0; i < parts.size(); ++i) {
      if (remaining_[i] == 0 && std::find(bucket_.begin(), bucket_.end(), i) == bucket_.end()) {
        keys.push_back(parts[i].key);
      }
    }
    pulls = pulls_;
  }
  // Each push's pull is sent by then, or (gated_pulls.h) once the pulls before it land.
  for (const Ticket& t : tickets) t.Wait().IgnoreError();
  if (!pulls.has_value()) return;
  for (const uint64_t key : keys) pulls->WaitKeys(key, key).IgnoreError();
}

bool BucketPusher::started() const {
  absl::MutexLock lock(&mu_);
  return started_;
}

std::optional<Ticket> BucketPusher::pulls() const {
  absl::MutexLock lock(&mu_);
  return pulls_;
}

int BucketPusher::early_partitions() const {
  absl::MutexLock lock(&mu_);
  return early_;
}

absl::Time BucketPusher::first_push() const {
  absl::MutexLock lock(&mu_);
  return first_push_;
}

bool BucketPusher::complete_when_opened() const {
  absl::MutexLock lock(&mu_);
  return complete_when_opened_;
}

}  // namespace r2sp
