// The heartbeats' news of the workers: which died and which finished, kept as a log in the
// order the scheduler learnt it, so that a heartbeat reply costs the news a node has not taken
// in yet instead of a scan of every worker (proto HeartbeatRequest.news_seen).
#ifndef R2SP_SCHEDULER_WORKER_NEWS_H_
#define R2SP_SCHEDULER_WORKER_NEWS_H_

#include <cstdint>
#include <vector>

#include "proto/messages.pb.h"

namespace r2sp {

// The version of the news is the count of it: version v means "the first v items". A node
// that took in the reply of version v says news_seen = v in its next heartbeat and is told
// only the items after it; a node that says 0 (new, or asking for everything) is told all of
// it, which is exactly what a reply listing every dead and finished worker says.
//
// Not thread-safe: NodeTable owns it, under SchedulerCore's lock.
class WorkerNews {
 public:
  // Worker `rank` was declared dead (or left) / sent FINISH. REQUIRES: at most one of the two,
  // once, per rank (a worker leaves the alive state once; NodeTable::SetState checks it).
  void Died(int rank) { log_.push_back(Item{rank, /*dead=*/true}); }
  void Finished(int rank) { log_.push_back(Item{rank, /*dead=*/false}); }

  int64_t version() const { return static_cast<int64_t>(log_.size()); }

  // Adds to `beat` the dead and the finished workers learnt after version `seen`, each list
  // in rank order, and sets its news_version. A `seen` outside [0, version()] (a node that
  // heard another scheduler, say) counts as 0: it is told everything. O(news after `seen`).
  void AddTo(int64_t seen, proto::HeartbeatReply& beat) const;

 private:
  struct Item {
    int rank;
    bool dead;  // else finished
  };
  std::vector<Item> log_;
};

}  // namespace r2sp

#endif  // R2SP_SCHEDULER_WORKER_NEWS_H_
