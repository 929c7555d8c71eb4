// See py_values.h.
#include "worker/python/py_values.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace r2sp {
namespace {

// One group's settings (OptimizerGroups).
proto::OptimizerSettings OptimizerSettingsOf(const py::dict& group) {
  static const std::map<std::string, proto::OptimizerKind> kinds = {
      {"sgd", proto::OPTIMIZER_SGD}, {"adam", proto::OPTIMIZER_ADAM},
      {"adamw", proto::OPTIMIZER_ADAMW}, {"average", proto::OPTIMIZER_AVERAGE}};
  using Setter = void (proto::OptimizerSettings::*)(double);
  static const std::map<std::string, Setter> numbers = {
      {"lr", &proto::OptimizerSettings::set_lr},
      {"weight_decay", &proto::OptimizerSettings::set_weight_decay},
      {"momentum", &proto::OptimizerSettings::set_momentum},
      {"dampening", &proto::OptimizerSettings::set_dampening},
      {"beta1", &proto::OptimizerSettings::set_beta1},
      {"beta2", &proto::OptimizerSettings::set_beta2},
      {"eps", &proto::OptimizerSettings::set_eps}};
  proto::OptimizerSettings settings;
  for (const auto& [key, value] : group) {
    const std::string name = py::cast<std::string>(py::str(key));
    if (name == "kind") {
      const auto kind = kinds.find(py::cast<std::string>(value));
      if (kind == kinds.end()) {
        throw py::value_error("optimizer kind '" + py::cast<std::string>(value) +
                              "' is not sgd, adam, adamw or average");
      }
      settings.set_kind(kind->second);
    } else if (name == "nesterov") {
      settings.set_nesterov(py::cast<bool>(value));
    } else if (const auto number = numbers.find(name); number != numbers.end()) {
      (settings.*(number->second))(py::cast<double>(value));
    } else {
      throw py::value_error("optimizer setting '" + name + "' is not one the servers apply");
    }
  }
  return settings;
}

}  // namespace

std::vector<proto::OptimizerSettings> OptimizerGroups(const py::list& groups) {
  std::vector<proto::OptimizerSettings> settings;
  for (const py::handle group : groups) {
    settings.push_back(OptimizerSettingsOf(py::cast<py::dict>(group)));
  }
  return settings;
}

std::map<std::string, OptionValue> OptionValues(const py::dict& options) {
  std::map<std::string, OptionValue> values;
  for (const auto& [key, value] : options) {
    if (!py::isinstance<py::str>(key)) {
      throw py::type_error("worker option names are strings, not " + std::string(py::repr(key)));
    }
    const std::string name = py::cast<std::string>(key);
    if (py::isinstance<py::bool_>(value)) {
      values[name] = py::cast<bool>(value);
    } else if (py::isinstance<py::int_>(value)) {
      try {
        values[name] = py::cast<int64_t>(value);
      } catch (const py::cast_error&) {
        throw py::value_error("worker option '" + name + "' is out of range: " +
                              std::string(py::repr(value)));
      }
    } else if (py::isinstance<py::float_>(value)) {
      values[name] = py::cast<double>(value);
    } else if (py::isinstance<py::str>(value)) {
      values[name] = py::cast<std::string>(value);
    } else {
      throw py::type_error("worker option '" + name + "' takes a bool, int, float or str, not " +
                           std::string(py::repr(value)));
    }
  }
  return values;
}

std::vector<ClientTensor> TensorList(const py::list& tensors) {
  std::vector<ClientTensor> specs;
  for (const py::handle item : tensors) {
    ClientTensor t;
    try {
      const py::sequence pair = py::cast<py::sequence>(item);
      if (pair.size() != 2) throw py::cast_error();
      t.name = py::cast<std::string>(pair[0]);
      t.shape = py::cast<std::vector<int64_t>>(pair[1]);
    } catch (const py::cast_error&) {
      throw py::type_error("each tensor is a (name, shape) pair: a str and a sequence of ints, "
                           "not " + std::string(py::repr(item)));
    }
    specs.push_back(std::move(t));
  }
  return specs;
}

namespace {

std::vector<float> MomentOf(const py::object& moment, const char* name) {
  if (moment.is_none()) return {};
  const py::buffer_info info = moment.cast<py::buffer>().request();
  if (info.format != py::format_descriptor<float>::format() || info.ndim != 1 ||
      info.strides[0] != static_cast<py::ssize_t>(sizeof(float))) {
    throw py::type_error(std::string("the optimizer state's ") + name +
                         " moment is a contiguous one-dimensional float32 buffer or None");
  }
  const float* values = static_cast<const float*>(info.ptr);
  return std::vector<float>(values, values + info.shape[0]);
}

py::object MomentBytes(const std::vector<float>& moment) {
  if (moment.empty()) return py::none();
  return py::bytes(reinterpret_cast<const char*>(moment.data()), moment.size() * sizeof(float));
}

}  // namespace

ScriptOptimizerState OptimizerStateOf(const py::object& first, const py::object& second,
                                      int64_t updates, double steps) {
  ScriptOptimizerState state;
  state.first = MomentOf(first, "first");
  state.second = MomentOf(second, "second");
  state.updates = updates;
  state.steps = steps;
  return state;
}

py::dict OptimizerStateDict(const ScriptOptimizerState& state) {
  py::dict d;
  d["first"] = MomentBytes(state.first);
  d["second"] = MomentBytes(state.second);
  d["updates"] = state.updates;
  d["steps"] = state.steps;
  return d;
}

}  // namespace r2sp
