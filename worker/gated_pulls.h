// Early pulls held back behind the pushes (--early_pulls_in_flight). With --early_pulls each
// partition is pulled as soon as its push is acknowledged; the pull's reply then shares the
// connection, and each end's one ZeroMQ I/O thread, with the pushes still to go, and the pushes
// backward finishes last are the partitions the next forward reads first. So at most `limit`
// pulls are in flight until every push of the iteration is acknowledged, the lowest key first
// (the forward's order); then the rest go at once, in key order. tools/bench/chain_bound's model
// of the H200 (3.8 GB/s): ResNet-18 0.98x the step alone with a limit of 1 or 2, against 0.80x
// unlimited and 0.89x with pulls after the last push.
#ifndef R2SP_WORKER_GATED_PULLS_H_
#define R2SP_WORKER_GATED_PULLS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "worker/host_gradient.h"
#include "worker/ps_client.h"

namespace r2sp {

// Which pulls may go, as pushes are acknowledged and pulls land. Thread-safe: pushes are
// acknowledged and pulls land on the requester's reply thread.
class PullGate {
 public:
  // An iteration pushing `pushes` partitions; `limit` pulls in flight before they are all
  // acknowledged (0: no limit, each pull goes as its push is acknowledged).
  PullGate(size_t pushes, int limit);

  // The push of `key` was answered (`ok`: acknowledged; a failed push's partition is not
  // pulled). Returns the keys to pull now, ascending.
  std::vector<uint64_t> Pushed(uint64_t key, bool ok);
  // A pull this gate released landed (or failed): the keys to pull now. (So a key waits only
  // while a pull is in flight, and an iteration given up still pulls back what it pushed.)
  std::vector<uint64_t> Landed();

 private:
  std::vector<uint64_t> Release(bool all) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int limit_;
  absl::Mutex mu_;
  std::set<uint64_t> waiting_ ABSL_GUARDED_BY(mu_);  // acknowledged, not yet pulled
  size_t pushes_left_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

// BucketPusher's pushes with their pulls behind a PullGate (limit 0: each pull as its push is
// acknowledged), one round per iteration.
class GatedPulls {
 public:
  // Borrowed: ps outlives the pulls sent.
  GatedPulls(PsClient* ps, int limit) : ps_(ps), limit_(limit) {}

  // A new iteration: `pushes` partitions, each pulled into `params` (the flat model) as part of
  // `pulls` (PsClient::PullGroup) with `options`. The previous round's pulls go on.
  void Start(size_t pushes, float* params, const PullOptions& options, const Ticket& pulls);
  // Pushes partition `key` (as PsClient::PushPartition, not init); its pull goes when the gate
  // lets it. The push's ticket, done once the gate has had its answer.
  Ticket Push(uint64_t key, HostGradient data, int64_t clock, float scale);

 private:
  struct Round;
  static void Send(PsClient* ps, const std::shared_ptr<Round>& round,
                   const std::vector<uint64_t>& keys);

  PsClient* const ps_;
  const int limit_;
  std::shared_ptr<Round> round_;  // the training thread's only
};

}  // namespace r2sp

#endif  // R2SP_WORKER_GATED_PULLS_H_
