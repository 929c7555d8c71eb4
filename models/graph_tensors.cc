// See graph_tensors.h.
#include "models/graph_tensors.h"

namespace r2sp::models {

std::vector<proto::TensorSpec> GraphTensorSpecs(const Graph& graph) {
  std::vector<proto::TensorSpec> specs;
  for (const Param& p : graph.params) {
    proto::TensorSpec t;
    t.set_name(p.name);
    t.set_num_elements(p.size());
    specs.push_back(t);
  }
  return specs;
}

}  // namespace r2sp::models
