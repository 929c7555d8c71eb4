// The answer of a genquery rule (Bazel's query, run at build time), for tests that check what a
// target depends on: its labels, one a line.
#ifndef R2SP_TESTS_TESTING_QUERY_LABELS_H_
#define R2SP_TESTS_TESTING_QUERY_LABELS_H_

#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace r2sp::testing {

// The labels in the genquery output at `path` (relative to the test's runfiles), one a line;
// fails the test when the file cannot be read.
inline std::vector<std::string> QueryLabels(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::vector<std::string> labels;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) labels.push_back(line);
  }
  return labels;
}

}  // namespace r2sp::testing

#endif  // R2SP_TESTS_TESTING_QUERY_LABELS_H_
