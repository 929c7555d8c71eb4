// What the Python extension r2sp._core (//worker/python:_core.so) links: the worker's session
// and the script's trainer, and neither the models (//models: their own r2sp._models carries
// the built-in models' initial values) nor any flag definitions (//worker:main_flags,
// //common:node_flags: flags are the binaries', and a host process's own --lr must not clash),
// nor a target of ours that uses gflags. Bazel answers the queries at build time (genquery in
// tests/worker/python/BUILD); this test reads the answers.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/testing/query_labels.h"

namespace r2sp {
namespace {

TEST(CoreDepsTest, TheExtensionLinksTheSessionAndNeitherModelsNorFlags) {
  const std::vector<std::string> deps = testing::QueryLabels("tests/worker/python/core_deps");
  bool saw_session = false, saw_trainer = false;
  for (const std::string& label : deps) {
    EXPECT_FALSE(absl::StartsWith(label, "//models")) << label;
    EXPECT_NE(label, "//worker:main_flags");
    EXPECT_NE(label, "//worker:worker_flags");
    EXPECT_NE(label, "//common:node_flags");
    EXPECT_NE(label, "//common:cli");
    saw_session |= label == "//worker:worker_session";
    saw_trainer |= label == "//worker:script_trainer";
  }
  EXPECT_TRUE(saw_session && saw_trainer) << "the query's answer is not the extension's deps";
}

TEST(CoreDepsTest, NoneOfOursUsesGflags) {
  for (const std::string& label : testing::QueryLabels("tests/worker/python/core_gflags_users")) {
    ADD_FAILURE() << label << " depends on @system//:gflags";
  }
}

}  // namespace
}  // namespace r2sp
