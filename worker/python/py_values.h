// What r2sp._core takes from Python, as the session's C++ values: the worker's options (a dict
// of typed values), the model's tensors ((name, shape) pairs) and the script's optimizer groups
// (dicts of torch's settings). Each throws the Python error (TypeError, ValueError) that says
// what is wrong; the values themselves are checked where they are used.
#ifndef R2SP_WORKER_PYTHON_PY_VALUES_H_
#define R2SP_WORKER_PYTHON_PY_VALUES_H_

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <string>
#include <vector>

#include "proto/messages.pb.h"
#include "worker/python/client_session.h"
#include "worker/session_option_map.h"

namespace r2sp {

namespace py = pybind11;

// A dict of worker options (str -> bool, int, float or str) as typed option values.
std::map<std::string, OptionValue> OptionValues(const py::dict& options);
// [(name, shape)] as the caller's tensors.
std::vector<ClientTensor> TensorList(const py::list& tensors);
// Each parameter group's settings from a dict: "kind" ("sgd", "adam" or "adamw") and any of
// lr, weight_decay, momentum, dampening, nesterov, beta1, beta2, eps (the servers check the
// values: wire::CheckOptimizerSettings). ValueError for another kind or key.
std::vector<proto::OptimizerSettings> OptimizerGroups(const py::list& groups);
// A script optimizer's state from its moments (one-dimensional float32 buffers of the model's
// size, or None) and counters; TypeError for another kind of buffer (the sizes and counters
// are checked where the state is sent).
ScriptOptimizerState OptimizerStateOf(const py::object& first, const py::object& second,
                                      int64_t updates, double steps);
// The state as {"first": bytes or None, "second": bytes or None, "updates": int, "steps":
// float}, the moments' bytes float32 in the model's order.
py::dict OptimizerStateDict(const ScriptOptimizerState& state);

}  // namespace r2sp

#endif  // R2SP_WORKER_PYTHON_PY_VALUES_H_
