// Tests of the scheduler's JobReportJson: the whole line for a small job, escaping, and the
// batch tuner's and the width tuner's parts when they exist.
#include "scheduler/job_report.h"

#include "gtest/gtest.h"

namespace r2sp {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1);

TEST(JobReportTest, ReportsEveryNodeAndTheJob) {
  NodeTable nodes;
  nodes.Add(proto::SERVER, "tcp://s\"0", "s0", "s0", kT0);
  Node& w = nodes.Add(proto::WORKER, "tcp://w0", "w0", "w0", kT0);
  w.state = NodeState::kFinished;
  w.counters.set_iterations(40);
  w.counters.set_model("mlp\n");
  SlotCoordinator slots(SlotCoordinatorOptions{}, /*r2sp=*/false);
  slots.SetMembers(1);
  const std::string node_zeros =
      "\"bytes_pushed\": 0, \"bytes_pulled\": 0, \"pushes\": 0, \"pulls\": 0, ";
  const std::string tail = "\"dropped_messages\": 0, \"seconds\": 0, ";
  EXPECT_EQ(
      JobReportJson(JobReport{proto::SSP, "it \\ broke", 3, "{\"heartbeats\": 2}"}, nodes, slots),
      "{\"sync\": \"SSP\", \"slot_grants\": 0, \"slot_width\": {\"width\": 1}, "
      "\"batching\": null, \"failure\": \"it \\\\ broke\", \"denied_requests\": 3, "
          "\"scale\": {\"heartbeats\": 2}, "
      "\"servers\": [{\"rank\": 0, \"endpoint\": \"tcp://s\\\"0\", \"state\": \"alive\", \"left\": false, " +
          node_zeros + "\"iterations\": 0, " + tail +
          "\"model\": \"\", \"samples\": 0, \"epochs\": 0, \"test_accuracy\": 0, "
          "\"final_loss\": 0, \"push_codec\": \"\", \"pull_codec\": \"\", "
          "\"retried_requests\": 0, \"repeated_pushes\": 0, \"rolled_back_steps\": 0}], "
          "\"workers\": [{\"rank\": 0, \"endpoint\": \"tcp://w0\", \"state\": \"finished\", \"left\": false, " +
          node_zeros + "\"iterations\": 40, " + tail +
          "\"model\": \"mlp\", \"samples\": 0, \"epochs\": 0, \"test_accuracy\": 0, "
          "\"final_loss\": 0, \"push_codec\": \"\", \"pull_codec\": \"\", "
          "\"retried_requests\": 0, \"repeated_pushes\": 0, \"rolled_back_steps\": 0}]}\n");
}

TEST(JobReportTest, TheTunersReportTheirState) {
  NodeTable nodes;
  nodes.Add(proto::WORKER, "tcp://w0", "w0", "w0", kT0);
  nodes.Add(proto::WORKER, "tcp://w1", "w1", "w1", kT0);
  SlotCoordinatorOptions options;
  options.width = 0;  // tuned
  options.hetero_batching = true;
  options.batching.global_batch = 64;
  SlotCoordinator slots(options, /*r2sp=*/true);
  slots.SetMembers(2);
  const std::string json = JobReportJson(JobReport{proto::R2SP, "", 0}, nodes, slots);
  EXPECT_NE(json.find("\"slot_width\": {\"width\": 1, \"changes\": 0, \"grants_by_width\": {}}"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"batching\": {\"changes\": 0, \"workers\": [{\"worker\": 0, \"batch\": "
                      "32, \"ideal\": 32, \"throughput\": 0}, {\"worker\": 1, \"batch\": 32, "
                      "\"ideal\": 32, \"throughput\": 0}]}"),
            std::string::npos)
      << json;
}

}  // namespace
}  // namespace r2sp
