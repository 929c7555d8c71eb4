// r2sp._models: the C++ worker's built-in models' initial parameters for Python (pybind11), so
// that a script's copy of a built-in model (examples/pytorch) starts from the numbers a C++
// worker with the same seed starts from. A module of its own: r2sp._core, the worker, does not
// carry the model code.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/graph.h"

namespace py = pybind11;

namespace r2sp {
namespace {

void BindBuiltinParameters(py::module_& m) {
  m.def("builtin_parameters",
        [](const std::string& model, std::vector<int> input_chw, int num_classes, uint64_t seed) {
          if (input_chw.size() != 3) {
            throw py::value_error("input_chw is (channels, height, width)");
          }
          absl::StatusOr<models::Graph> graph = models::BuildModel(
              model, models::Shape{input_chw[0], input_chw[1], input_chw[2]}, num_classes);
          if (!graph.ok()) throw py::value_error(std::string(graph.status().message()));
          int64_t size = 0;
          for (const models::Param& p : graph->params) size += p.size();
          std::vector<float> values(size);
          models::InitParams(*graph, seed, values.data());
          py::list out;
          int64_t offset = 0;
          for (const models::Param& p : graph->params) {
            const char* bytes = reinterpret_cast<const char*>(values.data() + offset);
            out.append(py::make_tuple(p.name, p.dims, py::bytes(bytes, p.size() * sizeof(float))));
            offset += p.size();
          }
          return out;
        },
        py::arg("model"), py::arg("input_chw"), py::arg("num_classes"), py::arg("seed"));
}

}  // namespace
}  // namespace r2sp

PYBIND11_MODULE(_models, m) {
  m.doc() = "The C++ worker's built-in models' initial parameters (see docs/PYTORCH.md)";
  r2sp::BindBuiltinParameters(m);
}
