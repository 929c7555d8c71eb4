// What the session libraries (//worker:session_option_map, and //worker:session_options under
// it), which the Python extension links, reach: no //models, and no target of ours that uses
// gflags (flags are the binaries'). Bazel answers the queries at build time (genquery in
// tests/worker/BUILD); this test reads the answers. @system//:glog's own dependency on gflags
// (Debian's libglog is built with it) is the library's, not ours.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/testing/query_labels.h"

namespace r2sp {
namespace {

TEST(SessionLibrariesDepsTest, NoModels) {
  const std::vector<std::string> deps = testing::QueryLabels("tests/worker/session_option_map_deps");
  bool saw_session_options = false;
  for (const std::string& label : deps) {
    EXPECT_FALSE(absl::StartsWith(label, "//models")) << label;
    saw_session_options |= label == "//worker:session_options";
  }
  EXPECT_TRUE(saw_session_options) << "the query's answer is not the libraries' deps";
}

TEST(SessionLibrariesDepsTest, NoneOfOursUsesGflags) {
  for (const std::string& label : testing::QueryLabels("tests/worker/session_option_map_gflags_users")) {
    ADD_FAILURE() << label << " depends on @system//:gflags";
  }
}

}  // namespace
}  // namespace r2sp
