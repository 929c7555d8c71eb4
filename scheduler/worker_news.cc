// See worker_news.h.
#include "scheduler/worker_news.h"

#include <algorithm>

namespace r2sp {

void WorkerNews::AddTo(int64_t seen, proto::HeartbeatReply& beat) const {
  const int64_t from = seen >= 0 && seen <= version() ? seen : 0;
  beat.set_news_version(version());
  if (from == version()) return;  // the common case: nothing new
  std::vector<int> dead;
  std::vector<int> finished;
  for (size_t i = static_cast<size_t>(from); i < log_.size(); ++i) {
    (log_[i].dead ? dead : finished).push_back(log_[i].rank);
  }
  // In rank order, as the replies listed them when they were a scan of every worker.
  std::sort(dead.begin(), dead.end());
  std::sort(finished.begin(), finished.end());
  for (int rank : dead) beat.add_dead_workers(rank);
  for (int rank : finished) beat.add_finished_workers(rank);
}

}  // namespace r2sp
