// r2sp._core: the Python client's extension module (pybind11) over ClientSession
// (client_session.h) and the data-plan helpers a sampler needs. The worker's options come as a
// dict of typed values (session_option_map.h). Every call runs on the calling thread; one that
// may wait releases the GIL. Ctrl-C while joined (the interpreter's signal wakeup fd, read by
// the session's watch thread) makes the worker leave the job and the waiting call raise
// KeyboardInterrupt. C++ errors become r2sp._core.R2SPError (.code: the absl status code's
// name); the worker lost to the job (the scheduler gone, declared dead, the job failed) becomes
// JobLost, an R2SPError. The interfaces: docs/PYTORCH.md.
#include <fcntl.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "common/epoch_samples.h"
#include "common/live_shards.h"
#include "glog/logging.h"
#include "worker/python/client_session.h"
#include "worker/python/py_values.h"
#include "worker/python/signal_pipe.h"
#include "worker/session_option_map.h"
#include "worker/synthetic_workload.h"

namespace py = pybind11;

namespace r2sp {
namespace {

PyObject* r2sp_error = nullptr;  // r2sp._core.R2SPError
PyObject* job_lost = nullptr;    // r2sp._core.JobLost

// Raises `status` (not OK) as R2SPError or JobLost, or, after an interrupt, the
// KeyboardInterrupt of the signal Python has pending. REQUIRES: the GIL is held.
[[noreturn]] void Raise(const absl::Status& status) {
  if (PyErr_Occurred() != nullptr || PyErr_CheckSignals() != 0) throw py::error_already_set();
  PyObject* type = absl::IsAborted(status) ? job_lost : r2sp_error;
  py::object error = py::reinterpret_borrow<py::object>(type)(std::string(status.message()));
  error.attr("code") = absl::StatusCodeToString(status.code());
  PyErr_SetObject(type, error.ptr());
  throw py::error_already_set();
}

void Check(const absl::Status& status) {
  if (!status.ok()) Raise(status);
}

// One of the session's flat buffers, exposed through the buffer protocol; it keeps its
// Worker alive.
struct FlatBuffer {
  py::object owner;
  void* data;
  int64_t count;
  bool fp16;
};

// r2sp._core.Worker: the session, its buffers, the job it joined, and the signal pipe that lets
// Ctrl-C reach the session while it is in the job.
class Worker {
 public:
  Worker(const py::dict& options, const py::list& tensors, const std::string& model_name,
         bool params_staged) {
    absl::StatusOr<ClientModel> model = ClientModel::Of(TensorList(tensors));
    if (!model.ok()) throw py::value_error(std::string(model.status().message()));
    absl::StatusOr<std::unique_ptr<ClientSession>> session =
        ClientSession::Create(OptionValues(options), *std::move(model), model_name, params_staged);
    if (!session.ok()) Raise(session.status());
    session_ = std::move(*session);
  }
  // The session (and its watch thread) before the pipe it reads.
  ~Worker() {
    {
      py::gil_scoped_release release;
      session_.reset();
    }
    signals_.Restore();
  }

  ClientSession& session() { return *session_; }
  const JoinedJob& job() const {
    if (!joined_) throw std::runtime_error("the worker has not joined the job (call join())");
    return session_->joined();
  }
  void Join() {
    signals_.Install();
    absl::Status status;
    {
      py::gil_scoped_release release;
      status = session_->Join(signals_.read_fd(), signals_.previous_fd());
    }
    if (!status.ok()) signals_.Restore();
    Check(status);
    joined_ = true;
  }
  // After finish() or abort(): Ctrl-C is the script's alone again.
  void Left() { signals_.Restore(); }

 private:
  std::unique_ptr<ClientSession> session_;
  SignalPipe signals_;
  bool joined_ = false;
};

py::memoryview Buffer(py::object self, void* data, int64_t count, bool fp16) {
  return py::memoryview(py::cast(FlatBuffer{std::move(self), data, count, fp16}));
}

void BindHelpers(py::module_& m) {
  m.def("epoch_samples",
        [](int64_t size, int world, int shard, const std::vector<int>& live) {
          if (size < 0 || world < 1 || shard < 0 || shard >= world) {
            throw py::value_error("epoch_samples needs size >= 0 and 0 <= shard < world");
          }
          Check(CheckLiveShards(live, world));
          return EpochSamples(size, world, shard, live);
        },
        py::arg("size"), py::arg("world"), py::arg("shard"), py::arg("live"));
  m.def("fewest_epoch_samples",
        [](int64_t size, int world, const std::vector<int>& live) {
          if (size < 0 || world < 1) throw py::value_error("needs size >= 0 and world >= 1");
          Check(CheckLiveShards(live, world));
          return FewestEpochSamples(size, world, live);
        },
        py::arg("size"), py::arg("world"), py::arg("live"));
  m.def("epoch_order",
        [](std::vector<int64_t> samples, uint64_t seed, int epoch, int shard) {
          std::mt19937_64 rng;
          OrderForEpoch(seed, epoch, shard, /*shuffle=*/true, &rng, &samples);
          return samples;
        },
        py::arg("samples"), py::arg("seed"), py::arg("epoch"), py::arg("shard"));
  m.def("model_option_names", [] { return ModelOptionNames(); });
  m.def("synthetic_model", [](int64_t total_floats, int layers) {
    if (layers < 1 || total_floats < 65 * static_cast<int64_t>(layers)) {
      throw py::value_error("synthetic_model needs layers >= 1 and 65 floats per layer");
    }
    std::vector<std::pair<std::string, std::vector<int64_t>>> out;
    for (const proto::TensorSpec& t : SyntheticModel(total_floats, layers)) {
      out.push_back({t.name(), {static_cast<int64_t>(t.num_elements())}});
    }
    return out;
  });
  m.def("fill_known_gradient", [](int rank, int64_t clock, py::buffer out) {
    const py::buffer_info info = out.request(/*writable=*/true);
    if (info.format != py::format_descriptor<float>::format() || info.ndim != 1) {
      throw py::type_error("fill_known_gradient writes a one-dimensional float32 buffer");
    }
    FillKnownGradient(rank, clock, static_cast<float*>(info.ptr), info.shape[0]);
  });
}

void BindStep(py::module_& m) {
  py::class_<ScriptStep>(m, "Step")
      .def_readonly("clock", &ScriptStep::clock)
      .def_readonly("epoch", &ScriptStep::epoch)
      .def_readonly("index", &ScriptStep::index)
      .def_readonly("epoch_steps", &ScriptStep::epoch_steps)
      .def_readonly("batch", &ScriptStep::batch)
      .def_readonly("live_shards", &ScriptStep::live_shards)
      .def("__repr__", [](const ScriptStep& s) {
        return "Step(clock=" + std::to_string(s.clock) + ", epoch=" + std::to_string(s.epoch) +
               ", index=" + std::to_string(s.index) + "/" + std::to_string(s.epoch_steps) +
               ", batch=" + std::to_string(s.batch) + ")";
      });
  py::class_<FlatBuffer>(m, "FlatBuffer", py::buffer_protocol())
      .def_buffer([](FlatBuffer& b) {
        const py::ssize_t item = b.fp16 ? 2 : 4;
        return py::buffer_info(b.data, item,
                               b.fp16 ? py::format_descriptor<uint16_t>::format()
                                      : py::format_descriptor<float>::format(),
                               1, {static_cast<py::ssize_t>(b.count)}, {item});
      });
}

// Runs `call` with the GIL released; raises its error with the GIL back.
template <typename T>
T Released(const std::function<absl::StatusOr<T>()>& call) {
  absl::StatusOr<T> result = absl::UnknownError("not run");
  {
    py::gil_scoped_release release;
    result = call();
  }
  if (!result.ok()) Raise(result.status());
  return *std::move(result);
}

void ReleasedStatus(const std::function<absl::Status()>& call) {
  absl::Status status;
  {
    py::gil_scoped_release release;
    status = call();
  }
  Check(status);
}

py::dict ResultDict(const LoopResult& r, const PsClientCounters& traffic) {
  py::dict d;
  d["steps"] = r.steps;
  d["samples"] = r.samples;
  d["epochs"] = r.epochs;
  d["seconds"] = r.seconds;
  d["compute_seconds"] = r.compute_seconds;
  d["push_seconds"] = r.push_seconds;
  d["pull_seconds"] = r.pull_seconds;
  d["wait_seconds"] = r.wait_seconds;
  d["overlapped_pulls"] = r.overlapped_pulls;
  d["test_accuracy"] = r.test_accuracy;
  d["final_batch"] = r.final_batch;
  d["bytes_pushed"] = traffic.bytes_pushed;
  d["bytes_pulled"] = traffic.bytes_pulled;
  d["pushes"] = traffic.pushes;
  d["pulls"] = traffic.pulls;
  return d;
}

void BindJobProperties(py::class_<Worker>& w) {
  w.def_property_readonly("rank", [](const Worker& x) { return x.job().rank; })
      .def_property_readonly("workers", [](const Worker& x) { return x.job().workers; })
      .def_property_readonly("mode", [](const Worker& x) { return x.job().mode; })
      .def_property_readonly("hetero_batching",
                             [](const Worker& x) { return x.job().hetero_batching; })
      .def_property_readonly("evaluates",
                             [](Worker& x) {
                               x.job();  // joined
                               return x.session().evaluates();
                             })
      .def_property_readonly("data_world", [](const Worker& x) { return x.job().data_world; })
      .def_property_readonly("data_shard", [](const Worker& x) { return x.job().data_shard; })
      .def_property_readonly("first_step", [](const Worker& x) { return x.job().first_step; })
      .def_property_readonly("batch_size", [](const Worker& x) { return x.job().batch_size; })
      .def_property_readonly("elastic_period",
                             [](const Worker& x) { return x.job().elastic_period; })
      .def_property_readonly("overlaps_backward",
                             [](const Worker& x) { return x.job().overlaps_backward; })
      .def_property_readonly("overlaps_pulls", [](Worker& x) {
        x.job();  // joined
        return x.session().overlaps_pulls();
      });
}

// What the servers keep of the script's optimizer: its settings, its state (pulled, or a
// checkpoint's to start from), and the elastic modes' centre.
void BindOptimizerState(py::class_<Worker>& w) {
  w.def("set_optimizer", [](Worker& x, const py::list& groups,
                            const std::vector<int>& tensor_groups) {
        Check(x.session().SetOptimizer(OptimizerGroups(groups), tensor_groups));
      }, py::arg("groups"), py::arg("tensor_groups"))
      .def("set_initial_state", [](Worker& x, const py::object& first, const py::object& second,
                                   int64_t updates, double steps) {
        Check(x.session().SetInitialState(OptimizerStateOf(first, second, updates, steps)));
      }, py::arg("first"), py::arg("second"), py::arg("updates"), py::arg("steps"))
      .def("pull_optimizer_state", [](Worker& x) {
        return OptimizerStateDict(
            Released<ScriptOptimizerState>([&x] { return x.session().PullOptimizerState(); }));
      })
      .def("pull_centre", [](Worker& x) {
        ReleasedStatus([&x] { return x.session().PullCentre(); });
      })
      .def_property_readonly("centre", [](py::object self) {
        ClientSession& s = self.cast<Worker&>().session();
        return Buffer(self, const_cast<float*>(s.centre()), s.centre_size(), false);
      });
}

void BindWorker(py::module_& m) {
  py::class_<Worker> w(m, "Worker");
  w.def(py::init<const py::dict&, const py::list&, const std::string&, bool>(),
        py::arg("options"), py::arg("tensors"), py::arg("model_name") = "pytorch",
        py::arg("params_staged") = false)
      .def_property_readonly("size", [](Worker& x) { return x.session().size(); })
      .def_property_readonly("tensors", [](Worker& x) { return x.session().offsets(); })
      .def_property_readonly("params", [](py::object self) {
        ClientSession& s = self.cast<Worker&>().session();
        return Buffer(self, s.params(), s.size(), false);
      })
      .def_property_readonly("grads", [](py::object self) {
        ClientSession& s = self.cast<Worker&>().session();
        return Buffer(self, s.grads(), s.size(), false);
      })
      .def_property_readonly("grads16", [](py::object self) {
        ClientSession& s = self.cast<Worker&>().session();
        return Buffer(self, s.grads16(), s.size(), true);
      })
      .def_property_readonly("push_codec", [](Worker& x) { return x.session().push_codec(); })
      .def("join", &Worker::Join)
      .def("begin_training", [](Worker& x, int64_t n) { Check(x.session().BeginTraining(n)); },
           py::arg("train_samples"))
      .def("next_step", [](Worker& x) {
        return Released<std::optional<ScriptStep>>([&x] { return x.session().NextStep(); });
      })
      .def("gradient_ready", [](Worker& x, int64_t offset, int64_t count, bool fp16) {
        ReleasedStatus([&] { return x.session().GradientReady(offset, count, fp16); });
      }, py::arg("offset"), py::arg("count"), py::arg("fp16") = false)
      .def("push_nonzero_rows", [](Worker& x, int64_t offset, int64_t count) {
        Check(x.session().PushNonzeroRowsOf(offset, count));
      }, py::arg("offset"), py::arg("count"))
      .def("enable_forward_waits",
           [](Worker& x) { Check(x.session().EnableForwardWaits()); })
      .def("params_needed", [](Worker& x, int64_t offset, int64_t count) {
        ReleasedStatus([&] { return x.session().ParamsNeeded(offset, count); });
      }, py::arg("offset"), py::arg("count"))
      .def("submit", [](Worker& x, int samples, double loss, bool fp16, bool skip,
                        double began) {
        // began: Unix seconds (time.time()) when the step's compute began; 0: when handed out.
        const absl::Time when =
            began > 0 ? absl::UnixEpoch() + absl::Seconds(began) : absl::InfinitePast();
        ReleasedStatus([&] { return x.session().Submit(samples, loss, fp16, skip, when); });
      }, py::arg("samples"), py::arg("loss"), py::arg("fp16") = false, py::arg("skip") = false,
         py::arg("began") = 0.0)
      .def("evaluation_due", [](Worker& x) { return x.session().EvaluationDue(); })
      .def("report_eval", [](Worker& x, double accuracy, double loss) {
        return x.session().ReportEvaluation(accuracy, loss);
      }, py::arg("accuracy"), py::arg("loss") = 0.0)
      .def("finish", [](Worker& x) {
        absl::StatusOr<LoopResult> result = absl::UnknownError("not run");
        {
          py::gil_scoped_release release;
          result = x.session().Finish();
        }
        x.Left();
        if (!result.ok()) Raise(result.status());
        return ResultDict(*result, x.session().traffic());
      })
      .def("abort", [](Worker& x, const std::string& why) {
        {
          py::gil_scoped_release release;
          x.session().Abort(why);
        }
        x.Left();
      }, py::arg("why") = "aborted")
      .def_property_readonly("last_push_thread",
                             [](Worker& x) { return x.session().last_push_thread(); });
  BindOptimizerState(w);
  BindJobProperties(w);
}

}  // namespace
}  // namespace r2sp

PYBIND11_MODULE(_core, m) {
  m.doc() = "R2SP's Python client: a worker of an R2SP job (see docs/PYTORCH.md)";
  if (!google::IsGoogleLoggingInitialized()) {
    FLAGS_logtostderr = true;
    google::InitGoogleLogging("r2sp");
  }
  static py::exception<std::runtime_error> error(m, "R2SPError", PyExc_RuntimeError);
  static py::exception<std::runtime_error> lost(m, "JobLost", error.ptr());
  r2sp::r2sp_error = error.ptr();
  r2sp::job_lost = lost.ptr();
  r2sp::BindHelpers(m);
  r2sp::BindStep(m);
  r2sp::BindWorker(m);
}
