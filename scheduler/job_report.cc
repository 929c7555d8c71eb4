// See job_report.h.
#include "scheduler/job_report.h"

#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

std::string NodesJson(const std::deque<Node>& nodes) {
  std::vector<std::string> items;
  for (const Node& n : nodes) {
    const proto::NodeCounters& c = n.counters;
    const char* state = n.state == NodeState::kAlive      ? "alive"
                        : n.state == NodeState::kFinished ? "finished"
                                                          : "dead";
    items.push_back(absl::StrCat(
        "{\"rank\": ", n.rank, ", \"endpoint\": ", JsonString(n.endpoint), ", \"state\": \"", state,
        "\", \"left\": ", n.left ? "true" : "false", ", \"bytes_pushed\": ", c.bytes_pushed(),
        ", \"bytes_pulled\": ", c.bytes_pulled(),
        ", \"pushes\": ", c.pushes(), ", \"pulls\": ", c.pulls(),
        ", \"iterations\": ", c.iterations(), ", \"dropped_messages\": ", c.dropped_messages(),
        ", \"seconds\": ", c.seconds(), ", \"model\": ", JsonString(c.model()), ", \"samples\": ",
        c.samples(), ", \"epochs\": ", c.epochs(), ", \"test_accuracy\": ", c.test_accuracy(),
        ", \"final_loss\": ", c.final_loss(), ", \"push_codec\": ", JsonString(c.push_codec()),
        ", \"pull_codec\": ", JsonString(c.pull_codec()), ", \"retried_requests\": ",
        c.retried_requests(), ", \"repeated_pushes\": ", c.repeated_pushes(),
        ", \"rolled_back_steps\": ", c.rolled_back_steps(), "}"));
  }
  return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
}

// The batch tuner's state, or null without hetero batching.
std::string BatchingJson(const SlotCoordinator& slots, size_t num_workers) {
  const BatchTuner* tuner = slots.tuner();
  if (tuner == nullptr) return "null";
  std::vector<std::string> rows;
  const std::vector<int> ideal = tuner->Ideal(/*include_departed=*/true);
  // A joiner is in the node table before the servers know it, and in the tuner only after.
  for (size_t w = 0; w < std::min(num_workers, ideal.size()); ++w) {
    rows.push_back(absl::StrCat("{\"worker\": ", w, ", \"batch\": ", tuner->batch(w),
                                ", \"ideal\": ", ideal[w],
                                ", \"throughput\": ", tuner->throughput(w), "}"));
  }
  return absl::StrCat("{\"changes\": ", tuner->changes(), ", \"workers\": [",
                      absl::StrJoin(rows, ", "), "]}");
}

// The width in force at the end; with --r2sp_slot_width=auto the tuner's changes and how many
// grants each width got.
std::string SlotWidthJson(const SlotCoordinator& slots) {
  std::string slot_width = absl::StrCat("{\"width\": ", slots.planner().width());
  if (const SlotWidthTuner* w = slots.width_tuner(); w != nullptr) {
    std::vector<std::string> by_width;
    const std::vector<int64_t>& grants = slots.planner().grants_by_width();
    for (size_t k = 1; k < grants.size(); ++k) {
      if (grants[k] > 0) by_width.push_back(absl::StrCat("\"", k, "\": ", grants[k]));
    }
    absl::StrAppend(&slot_width, ", \"changes\": ", w->changes(), ", \"grants_by_width\": {",
                    absl::StrJoin(by_width, ", "), "}");
  }
  return slot_width + "}";
}

}  // namespace

std::string JobReportJson(const JobReport& report, const NodeTable& nodes,
                          const SlotCoordinator& slots) {
  return absl::StrCat("{\"sync\": \"", proto::SyncMode_Name(report.sync), "\", ",
                      "\"slot_grants\": ", slots.planner().grants(),
                      ", \"slot_width\": ", SlotWidthJson(slots),
                      ", \"batching\": ", BatchingJson(slots, nodes.workers().size()), ", ",
                      "\"failure\": ", JsonString(report.failure),
                      ", \"denied_requests\": ", report.denied_requests,
                      ", \"scale\": ", report.scale,
                      ", \"servers\": ", NodesJson(nodes.servers()),
                      ", \"workers\": ", NodesJson(nodes.workers()), "}\n");
}

}  // namespace r2sp
