// GraphTensorSpecs: a graph's parameters as the tensors a worker registers.
#include "models/graph_tensors.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace r2sp::models {
namespace {

TEST(GraphTensorsTest, OneSpecPerParameterWithItsNameAndSize) {
  const Graph g = BuildCnn({1, 28, 28}, 10);
  auto specs = GraphTensorSpecs(g);
  ASSERT_EQ(specs.size(), g.params.size());
  int64_t total = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(specs[i].name(), g.params[i].name);
    total += specs[i].num_elements();
  }
  EXPECT_EQ(total, g.num_parameters());
}

}  // namespace
}  // namespace r2sp::models
