// See scheduler_core.h. SchedulerCore's end-of-job report: every node's counters, the slot
// grants and the batch tuner's state, as JSON (the scheduler's --stats_json).
#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/scheduler_core.h"

namespace r2sp {
namespace {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string SchedulerCore::ReportJson() const {
  absl::MutexLock lock(&mu_);
  auto nodes_json = [](const std::deque<Node>& nodes) {
    std::vector<std::string> items;
    for (const Node& n : nodes) {
      const proto::NodeCounters& c = n.counters;
      const char* state = n.state == NodeState::kAlive      ? "alive"
                          : n.state == NodeState::kFinished ? "finished"
                                                            : "dead";
      items.push_back(absl::StrCat(
          "{\"rank\": ", n.rank, ", \"endpoint\": ", JsonString(n.endpoint),
          ", \"state\": \"", state, "\", \"bytes_pushed\": ", c.bytes_pushed(),
          ", \"bytes_pulled\": ", c.bytes_pulled(), ", \"pushes\": ", c.pushes(),
          ", \"pulls\": ", c.pulls(), ", \"iterations\": ", c.iterations(),
          ", \"dropped_messages\": ", c.dropped_messages(), ", \"seconds\": ", c.seconds(),
          ", \"model\": ", JsonString(c.model()), ", \"samples\": ", c.samples(),
          ", \"epochs\": ", c.epochs(), ", \"test_accuracy\": ", c.test_accuracy(),
          ", \"final_loss\": ", c.final_loss(), ", \"push_codec\": ", JsonString(c.push_codec()),
          ", \"pull_codec\": ", JsonString(c.pull_codec()),
          ", \"retried_requests\": ", c.retried_requests(),
          ", \"repeated_pushes\": ", c.repeated_pushes(),
          ", \"rolled_back_steps\": ", c.rolled_back_steps(), "}"));
    }
    return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
  };
  std::string batching = "null";
  if (const BatchTuner* tuner = slots_.tuner(); tuner != nullptr) {
    std::vector<std::string> rows;
    const std::vector<int> ideal = tuner->Ideal(/*include_departed=*/true);
    // A joiner is in workers_ before the servers know it, and in the tuner only after.
    for (size_t w = 0; w < std::min(workers_.size(), ideal.size()); ++w) {
      rows.push_back(absl::StrCat("{\"worker\": ", w, ", \"batch\": ", tuner->batch(w),
                                  ", \"ideal\": ", ideal[w], ", \"throughput\": ",
                                  tuner->throughput(w), "}"));
    }
    batching = absl::StrCat("{\"changes\": ", tuner->changes(), ", \"workers\": [",
                            absl::StrJoin(rows, ", "), "]}");
  }
  // The width in force at the end; with --r2sp_slot_width=auto the tuner's changes and how
  // many grants each width got.
  std::string slot_width = absl::StrCat("{\"width\": ", slots_.planner().width());
  if (const SlotWidthTuner* w = slots_.width_tuner(); w != nullptr) {
    std::vector<std::string> by_width;
    const std::vector<int64_t>& grants = slots_.planner().grants_by_width();
    for (size_t k = 1; k < grants.size(); ++k) {
      if (grants[k] > 0) by_width.push_back(absl::StrCat("\"", k, "\": ", grants[k]));
    }
    absl::StrAppend(&slot_width, ", \"changes\": ", w->changes(), ", \"grants_by_width\": {",
                    absl::StrJoin(by_width, ", "), "}");
  }
  slot_width += "}";
  return absl::StrCat("{\"sync\": \"", proto::SyncMode_Name(options_.sync), "\", ",
                      "\"slot_grants\": ", slots_.planner().grants(),
                      ", \"slot_width\": ", slot_width, ", \"batching\": ", batching, ", ",
                      "\"failure\": ", JsonString(failure_),
                      ", \"denied_requests\": ", denied_requests_, ", \"servers\": ",
                      nodes_json(servers_), ", \"workers\": ", nodes_json(workers_), "}\n");
}

}  // namespace r2sp
