// A model's parameters as the tensors a worker registers with its job (proto TensorSpec): apart
// from graph.h, so that what only builds models (the Python client's r2sp._models) does not
// carry the job's messages.
#ifndef R2SP_MODELS_GRAPH_TENSORS_H_
#define R2SP_MODELS_GRAPH_TENSORS_H_

#include <vector>

#include "models/graph.h"
#include "proto/messages.pb.h"

namespace r2sp::models {

// One TensorSpec per parameter, in the graph's order: its name and element count.
std::vector<proto::TensorSpec> GraphTensorSpecs(const Graph& graph);

}  // namespace r2sp::models

#endif  // R2SP_MODELS_GRAPH_TENSORS_H_
