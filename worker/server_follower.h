// Follows the scheduler's news of lost and replaced servers (proto HeartbeatReply) for a
// worker: the connection to a lost server is reset, so the requests it still owes fail at once
// and the PsClient retries them (none reaches whatever takes the endpoint over afterwards); a
// replacement's endpoint takes the lost one's place in the PsClient. Requests name the rank
// they are for (proto Header.to_server), so one that reaches another rank's server, at an
// endpoint that passed from one lost server to another's replacement, is refused and retried.
#ifndef R2SP_WORKER_SERVER_FOLLOWER_H_
#define R2SP_WORKER_SERVER_FOLLOWER_H_

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/handler.h"
#include "proto/messages.pb.h"
#include "worker/ps_client.h"

namespace r2sp {

// Thread-safe. Borrowed: requester and ps outlive it.
class ServerFollower {
 public:
  // `book`: the address book the worker registered with (incarnations from there).
  ServerFollower(Requester* requester, PsClient* ps, const proto::AddressBook& book);

  void OnHeartbeat(const proto::HeartbeatReply& beat) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Whether a rank other than `rank` is at `endpoint` now.
  bool ServedByAnotherRank(const std::string& endpoint, int rank) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Requester* const requester_;
  PsClient* const ps_;
  absl::Mutex mu_;
  std::vector<int> incarnation_ ABSL_GUARDED_BY(mu_);  // by server rank
  // The connection to this rank was reset for its current loss (not again until it is back).
  std::vector<bool> reset_ ABSL_GUARDED_BY(mu_);
};

}  // namespace r2sp

#endif  // R2SP_WORKER_SERVER_FOLLOWER_H_
