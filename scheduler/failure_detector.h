// Failure detection: a node is declared dead when its heartbeats stop (silent past the
// heartbeat timeout), and a worker also when the progress count its heartbeats carry stands
// still past the progress timeout while it waits for nothing from the scheduler (it hangs
// although its heartbeat thread runs). Pure: fed the time, no locking.
#ifndef R2SP_SCHEDULER_FAILURE_DETECTOR_H_
#define R2SP_SCHEDULER_FAILURE_DETECTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/time/time.h"
#include "scheduler/node_table.h"

namespace r2sp {

class FailureDetector {
 public:
  // A zero `progress_timeout` never declares a worker dead for its progress.
  FailureDetector(absl::Duration heartbeat_timeout, absl::Duration progress_timeout);

  // A live node's heartbeat at `now`, carrying its progress count.
  static void Heard(Node& node, int64_t progress, absl::Time now);

  struct Death {
    Node* node;
    std::string why;
  };
  // Declares dead, in rank order servers first, the live nodes silent too long and the workers
  // stalled too long. `joining(node)`: a joiner waiting for the servers (silent until its
  // REGISTER reply; its clocks restart). `waiting(node)`: the worker waits at a barrier or for
  // a slot (its progress clock restarts).
  std::vector<Death> Detect(NodeTable& nodes, absl::Time now,
                            absl::FunctionRef<bool(const Node&)> joining,
                            absl::FunctionRef<bool(const Node&)> waiting) const;
  // The live workers' progress clocks start again at `now` (they may have waited for a dead
  // node, or wait for a lost server's replacement).
  static void RestartProgressClocks(NodeTable& nodes, absl::Time now);
  // The scheduler did not run for `stalled` (its thread busy, e.g. sending a thousand address
  // books at the rendezvous, or the machine starved): the live nodes' silence and stillness
  // clocks move forward by it, since whatever they sent meanwhile still waits to be read. With
  // 1,024 workers the rendezvous took 4.4 s on a loaded 2-core machine, and every node was
  // declared dead at the first tick after it.
  static void Forgive(NodeTable& nodes, absl::Duration stalled);

 private:
  const absl::Duration heartbeat_timeout_;
  const absl::Duration progress_timeout_;
};

}  // namespace r2sp

#endif  // R2SP_SCHEDULER_FAILURE_DETECTOR_H_
